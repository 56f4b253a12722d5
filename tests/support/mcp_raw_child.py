"""A stdio MCP server that speaks raw JSON-RPC lines and misbehaves as told (argv[1]).

``silent``: reads every line and never answers (not even ``initialize``).
``bad-tools-list``: a proper ``initialize``, then a ``tools/list`` result that is
not MCP's shape (``{"tools": "none of your business"}``); ``ping`` is answered.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def answer(message_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main(mode: str) -> None:
    for line in sys.stdin:
        if mode == "silent":
            continue
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # a notification
        if method == "initialize":
            answer(
                message_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(message_id, {"tools": "none of your business"})
        else:
            answer(message_id, {})


if __name__ == "__main__":
    main(sys.argv[1])
