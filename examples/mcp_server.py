"""A guarded refund tool on an MCP server (MCP Python SDK 2.x ``MCPServer``).

The tool is registered with ``server.tool()`` as usual. A guarded tool returns
either its own value or a ``NotRun``; MCP validates return values against the
output schema it derives from the annotation, so ``on_not_run`` hands MCP its
own ``CallToolResult`` instead: the model reads the one-sentence reason, flagged
``isError`` (the call did not happen), and calls that ran keep their structured
output. The ``Context`` parameter is filled in by MCP and, recognised by its
type, never sent for approval.

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
from typing import Any

from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after


def did_not_run(not_run: ag.NotRun) -> CallToolResult:
    """A call that did not run, as MCP's own result: the reason, flagged as not a success."""
    return CallToolResult(content=[TextContent(type="text", text=str(not_run))], is_error=True)


def build(guard: ag.Guard) -> MCPServer:
    """An MCP server with one tool, each call guarded by ``guard``."""
    server = MCPServer("refunds")

    @server.tool()
    @guard.requires_approval(timeout="30m", on_not_run=did_not_run)
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
        print("denied:", await call(server, payment_id="payment_456", amount=9900))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
