"""``approval-guard mcp-proxy``: any stdio MCP server behind the guard (the ``mcp`` extra).

The proxy starts the server as its child, relays its tools (and resources and
prompts) unchanged to the MCP client on its own stdio, and sends each
``tools/call`` whose tool name matches a ``--guard`` glob through the guard
first: approved, the child's tool runs once with the approved arguments;
otherwise the client gets an ``isError`` result with the NotRun's sentence.
See docs/mcp-proxy.md. Importing this package imports no ``mcp``: that
happens when the proxy runs.
"""

from __future__ import annotations

from approval_guard.mcp_proxy._rules import ProxyRules
from approval_guard.mcp_proxy._run import run_proxy

__all__ = ["ProxyRules", "run_proxy"]
