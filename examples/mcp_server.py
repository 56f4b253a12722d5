"""A guarded refund tool on an MCP server (MCP Python SDK 2.x ``MCPServer``).

The tool is registered with ``server.tool()`` as usual, with one choice to make:
``structured_output=False``. A guarded tool returns either its own value or a
``NotRun``; with an output schema declared, MCP would validate a ``NotRun``
against it, fail, and send the model a bare "Error executing tool". Unstructured,
the ``NotRun`` arrives as text content carrying its message. The ``Context``
parameter is filled in by MCP and, recognised by its type, never sent for
approval.

Runs without a language model: it starts a local provider whose policy approves
(then denies) every request a moment after it appears, and calls the tool
through an in-process MCP client, as a host application would::

    pip install 'approval-guard[frameworks]'
    python examples/mcp_server.py

To serve it for real, build the server with a ``Guard`` for your provider and
call ``server.run()`` (stdio).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import TextContent

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after


def build(guard: ag.Guard) -> MCPServer:
    """An MCP server with one tool, each call guarded by ``guard``."""
    server = MCPServer("refunds")

    @server.tool(structured_output=False)
    @guard.requires_approval(timeout="30m")
    def issue_refund(payment_id: str, amount: int, ctx: Context) -> str:
        """Refund part of a payment; amount is in minor units (4900 is 49.00 GBP)."""
        return f"refunded {amount} of {payment_id} (MCP request {ctx.request_id})"

    return server


async def call(server: MCPServer, **arguments: Any) -> str:
    """tools/call from an MCP client; returns the text the model reads."""
    async with Client(server) as client:
        result = await client.call_tool("issue_refund", arguments)
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        server = build(ag.Guard(base_url=provider.url, credential=provider.credential))

        print("approved:", await call(server, payment_id="payment_123", amount=4900))
        print(f"reviewer saw: {provider.requests()[0].arguments}")

        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        # A non-str value is sent as JSON text: for a NotRun, its message as a JSON string.
        text = await call(server, payment_id="payment_456", amount=9900)
        print("denied:", json.loads(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
