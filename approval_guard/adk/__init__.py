"""approval_guard for Google ADK tools (the ``adk`` extra).

``guarded_tool(fn_or_FunctionTool, guard, **options)`` is a ``FunctionTool``
whose every call waits for approval; ``before_tool_callback(guard, tools={...})``
is an agent's ``before_tool_callback`` that asks before each listed tool runs;
``not_run_response`` is what the model gets when a call did not run. See
docs/adk.md. ADK is imported only when one of them is used.
"""

from __future__ import annotations

from approval_guard.adk._callback import before_tool_callback
from approval_guard.adk._tool import guarded_tool, not_run_response

__all__ = ["before_tool_callback", "guarded_tool", "not_run_response"]
