"""A scripted Claude Code CLI: the other end of the Claude Agent SDK's control protocol.

The SDK's ``query(..., transport=ScriptedCLI(...))`` runs its own loop against it:
the initialize handshake, then for each scripted tool call a ``can_use_tool``
control request (what the real CLI sends before it runs a tool), or
``mcp_message`` requests to an SDK MCP server (what it sends to run an SDK
``@tool``). On an allow, the scripted CLI "runs" the tool with the answer's
``updatedInput``; what it would hand the model as the tool's result is kept in
``model_saw``. No process, no network, no model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from claude_agent_sdk import Transport


class ScriptedCLI(Transport):
    """Plays the CLI for one prompt: ``calls`` is a list of ``(tool_name, input)``.

    A name ``mcp__<server>__<tool>`` listed in ``mcp`` is called on that SDK MCP
    server (after the CLI's permission request for it, as the real CLI does);
    any other allowed tool runs as ``run(tool_name, input)``.
    """

    def __init__(
        self,
        calls: list[tuple[str, dict[str, Any]]],
        run: Callable[[str, dict[str, Any]], str] | None = None,
        *,
        mcp: frozenset[str] = frozenset(),
        cancel_after: float | None = None,
    ) -> None:
        self.calls = calls
        self.run = run
        self.mcp = mcp
        self.cancel_after = cancel_after
        #: What the model would get back for each call: (tool_name, is_error, text).
        self.model_saw: list[tuple[str, bool, str]] = []
        #: The raw control responses the SDK sent for permission requests.
        self.responses: list[dict[str, Any]] = []
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._ready = False
        self._ids = 0

    async def connect(self) -> None:
        self._ready = True

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            if line.strip():
                self._inbox.put_nowait(json.loads(line))

    async def end_input(self) -> None:
        """Stdin closed by the SDK."""

    def is_ready(self) -> bool:
        return self._ready

    async def close(self) -> None:
        self._ready = False

    async def _next(self, kind: str) -> dict[str, Any]:
        while True:
            message = await self._inbox.get()
            if message.get("type") == kind:
                return message

    def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        return {"type": "control_request", "request_id": f"cli_{self._ids}", "request": request}

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        init = await self._next("control_request")
        yield {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": init["request_id"], "response": {}},
        }
        await self._next("user")
        for index, (name, tool_input) in enumerate(self.calls):
            ask = self._request(
                {
                    "subtype": "can_use_tool",
                    "tool_name": name,
                    "input": tool_input,
                    "tool_use_id": f"toolu_{index}",
                    "permission_suggestions": [],
                }
            )
            yield ask
            if self.cancel_after is not None:
                await asyncio.sleep(self.cancel_after)
                yield {"type": "control_cancel_request", "request_id": ask["request_id"]}
                await asyncio.sleep(0.5)  # the SDK's handler winds down
                self.model_saw.append((name, True, "cancelled by the CLI"))
                continue
            answer = (await self._next("control_response"))["response"]
            self.responses.append(answer)
            body = answer.get("response", {})
            if answer.get("subtype") != "success" or body.get("behavior") != "allow":
                text = body.get("message") or answer.get("error", "")
                self.model_saw.append((name, True, text))
                continue
            approved = body["updatedInput"]
            if name in self.mcp:
                async for message in self._mcp_call(name, approved):
                    yield message
            else:
                assert self.run is not None
                self.model_saw.append((name, False, self.run(name, approved)))
        yield {
            "type": "result",
            "subtype": "success",
            "duration_ms": 1,
            "duration_api_ms": 1,
            "is_error": False,
            "num_turns": 1,
            "session_id": "scripted",
            "result": "done",
        }

    async def _mcp_call(
        self, name: str, arguments: dict[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """The MCP handshake and a tools/call on the SDK MCP server, as the CLI does it."""
        _, server, tool = name.split("__", 2)
        messages: list[dict[str, Any]] = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "scripted-cli", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            },
        ]
        for message in messages:
            yield self._request(
                {"subtype": "mcp_message", "server_name": server, "message": message}
            )
            answer = (await self._next("control_response"))["response"]
            if message.get("id") == 2:
                result = answer["response"]["mcp_response"]["result"]
                text = " ".join(part.get("text", "") for part in result.get("content", []))
                self.model_saw.append((name, bool(result.get("isError")), text))
