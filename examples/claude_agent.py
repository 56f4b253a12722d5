"""A Claude Agent SDK agent whose refund tool waits for a person: ``can_use_tool``.

The Claude Code CLI asks the SDK before it runs a tool; ``approval_guard.claude.
can_use_tool`` answers by making the call an approval request and waiting for a
person. Approved: ``PermissionResultAllow(updated_input=...)``, with a reviewer's
edits in it. Anything else: ``PermissionResultDeny(message=...)``, one sentence the
model reads. A real agent passes the callback to the SDK::

    options = ClaudeAgentOptions(can_use_tool=callback, mcp_servers={"payments": server})
    async for message in query(prompt=..., options=options): ...

This example needs no CLI, no model and no provider of your own: it starts a
local provider that approves (then denies) each request a moment after it
appears, and calls the callback the way the SDK's query loop does, with the
SDK's own ToolPermissionContext, then runs the tool as the CLI would::

    pip install 'approval-guard[claude]'
    python examples/claude_agent.py
"""

from __future__ import annotations

import asyncio
from typing import Any

from claude_agent_sdk import PermissionResultAllow, ToolPermissionContext

import approval_guard as ag
from approval_guard.claude import can_use_tool
from approval_guard.testing import LocalProvider, approve_after, deny_after

TOOL = "mcp__payments__issue_refund"


def issue_refund(payment_id: str, amount: int) -> str:
    """What the CLI runs once the permission is granted (here, in-process)."""
    return f"refunded {amount} of {payment_id}"


async def agent_calls(callback: Any, call_id: str, tool_input: dict[str, Any]) -> str:
    """One tool call: the permission request, then the tool or the model's sentence."""
    answer = await callback(TOOL, tool_input, ToolPermissionContext(tool_use_id=call_id))
    if isinstance(answer, PermissionResultAllow):
        return issue_refund(**(answer.updated_input or tool_input))
    return str(answer.message)


def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        # The reviewer sees the tool as "issue_refund"; any other tool passes through.
        callback = can_use_tool(guard, tools={TOOL: {"tool": "issue_refund", "timeout": "30m"}})

        result = asyncio.run(
            agent_calls(callback, "toolu_1", {"payment_id": "payment_123", "amount": 4900})
        )
        print(f"approved: {result} (the CLI runs it with updated_input)")
        print(f"reviewer saw: {provider.requests()[0].arguments}")

        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        result = asyncio.run(
            agent_calls(callback, "toolu_2", {"payment_id": "payment_456", "amount": 9900})
        )
        print(f"denied: {result}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
