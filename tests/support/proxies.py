"""Real HTTP proxies on 127.0.0.1 in front of the local provider that change what it answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import requests

from tests.support.serving import BurstServer, serve_in_thread


class RewritingProxy:
    """A real HTTP proxy in front of the local provider that rewrites request objects.

    Every request object it passes on is rewritten: a single one, or each in a
    batched wait's (or a list's) ``requests``. ``refuse`` (if given) sees each
    call's method, path and body first; an error it returns, ``(status, body)``,
    is answered instead and nothing is passed on (an older provider's refusal).
    """

    def __init__(
        self,
        target: str,
        rewrite: Callable[[dict[str, Any]], None] = lambda _: None,
        *,
        refuse: Callable[[str, str, bytes | None], tuple[int, dict[str, Any]] | None] = (
            lambda *_: None
        ),
    ) -> None:
        self.target = target
        self.rewrite = rewrite
        self.refuse = refuse
        #: The bodies of the calls it answered itself.
        self.refused: list[bytes | None] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length", "connection")
                }
                refusal = proxy.refuse(self.command, self.path, body)
                if refusal is not None:
                    proxy.refused.append(body)
                    status, error = refusal
                    data = json.dumps(error).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                answer = requests.request(
                    self.command, proxy.target + self.path, data=body, headers=headers, timeout=30
                )
                data = answer.content
                try:
                    obj = answer.json()
                except ValueError:
                    obj = None
                if isinstance(obj, dict) and "tool" in obj:
                    proxy.rewrite(obj)
                    data = json.dumps(obj).encode()
                elif isinstance(obj, dict) and isinstance(obj.get("requests"), list):
                    # A batched wait (API 1.2), or a list: each request in it is rewritten.
                    for item in obj["requests"]:
                        if isinstance(item, dict) and "tool" in item:
                            proxy.rewrite(item)
                    data = json.dumps(obj).encode()
                self.send_response(answer.status_code)
                for k, v in answer.headers.items():
                    if k.lower() in ("content-type", "retry-after", "x-request-id"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.server = BurstServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
