"""approval_guard as the Claude Agent SDK's permission callback (the ``claude`` extra).

``can_use_tool(guard, tools={...})`` is a ``ClaudeAgentOptions(can_use_tool=...)``
callback that asks a person before each listed tool runs; ``not_run_result`` is
the ``on_not_run=`` of a guarded SDK MCP ``@tool`` handler. See docs/claude.md.
The SDK is imported only when one of them is used.
"""

from __future__ import annotations

from approval_guard.claude._permission import can_use_tool
from approval_guard.claude._tool import not_run_result

__all__ = ["can_use_tool", "not_run_result"]
