"""Any stdio MCP server behind the guard: ``approval-guard mcp-proxy`` between a client and it.

The server here is a tiny notes server (``python examples/mcp_proxy.py serve``)
that knows nothing of approvals. The proxy starts it as its child, lists its
tools unchanged, and sends each ``write_*`` call through the guard first;
``list_notes`` is relayed at once. A desktop client runs the proxy instead of
the server, for example in Claude Desktop's ``claude_desktop_config.json``::

    {
      "mcpServers": {
        "notes": {
          "command": "approval-guard",
          "args": ["mcp-proxy", "--guard", "write_*,delete_*", "--timeout", "10m",
                   "--", "python", "/path/to/examples/mcp_proxy.py", "serve"],
          "env": {
            "APPROVAL_GUARD_URL": "http://127.0.0.1:8765",
            "APPROVAL_GUARD_CREDENTIAL": "<the instance credential>"
          }
        }
      }
    }

Runs without a language model or a provider of your own: it starts a local
provider whose policy approves (then denies) every request a moment after it
appears, runs the proxy as a real subprocess, and calls the tools through a
real MCP client session, as a host application would::

    pip install 'approval-guard[mcp,server]'
    python examples/mcp_proxy.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from approval_guard.testing import LocalProvider, approve_after, deny_after

HERE = Path(__file__).resolve()


def serve() -> None:
    """The notes server: an ordinary stdio MCP server (MCP Python SDK 2.x ``MCPServer``)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("notes")
    notes: list[str] = []

    @server.tool(structured_output=False)
    def write_note(text: str, copies: int = 1) -> str:
        """Write a note (``copies`` times)."""
        notes.extend([text] * copies)
        return f"wrote {text!r} x{copies}"

    @server.tool(structured_output=False)
    def list_notes() -> str:
        """Every note written so far."""
        return ", ".join(notes) or "no notes"

    server.run()  # stdio


def _text(result: Any) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def demo(provider: LocalProvider) -> None:
    proxy = StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "approval_guard", "mcp-proxy", "--guard", "write_*", "--timeout", "10m"),
            *("--editable", "write_note:copies", "--", sys.executable, str(HERE), "serve"),
        ],
        env={
            **os.environ,
            "APPROVAL_GUARD_URL": provider.url,
            "APPROVAL_GUARD_CREDENTIAL": provider.credential,
        },
    )
    async with stdio_client(proxy) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        print("tools:", [tool.name for tool in (await client.list_tools()).tools])
        result = await client.call_tool("write_note", {"text": "buy milk", "copies": 1})
        print("approved:", _text(result))
        print(f"reviewer saw: {provider.requests()[0].arguments}")
        provider.policy = deny_after(0.2, "no more notes today")
        result = await client.call_tool("write_note", {"text": "buy cake"})
        print(f"denied (isError={result.is_error}):", _text(result))
        print("unguarded:", _text(await client.call_tool("list_notes", {})))


def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        anyio.run(demo, provider)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        raise SystemExit(main())
