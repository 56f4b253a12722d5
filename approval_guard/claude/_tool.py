"""What a guarded SDK MCP ``@tool`` handler returns when the call did not run."""

from __future__ import annotations

from typing import Any

from approval_guard._call.outcome import NotRun


def not_run_result(not_run: NotRun) -> dict[str, Any]:
    """The MCP tool result of a call that did not run: its sentence, flagged as an error.

    The ``on_not_run=`` of a handler guarded under the SDK's ``@tool``, whose
    result must be a dict of MCP content (a bare ``NotRun`` is not one)::

        @tool("refund", "Refund part of a payment", {"payment_id": str, "amount": int})
        @guard.requires_approval(timeout="30m", on_not_run=not_run_result)
        async def refund(args: dict) -> dict: ...

    Args:
        not_run: The call that did not run.
    """
    return {"content": [{"type": "text", "text": str(not_run)}], "is_error": True}
