"""A guarded refund tool as an OpenAI Agents SDK function tool, invoked as the runner does.

``function_tool`` wraps the guarded ``async def`` like any other: the schema the
model sees is the function's own, the run context parameter is filled in by the
SDK (and, recognised by its type, never sent for approval), and a call that did
not run returns a ``NotRun`` that the runner sends to the model as its message.

Runs without a language model: it starts a local provider whose policy approves
(then denies) every request a moment after it appears, and invokes the tool
with JSON arguments and a ``ToolContext``, as ``Runner.run`` does::

    pip install 'approval-guard[frameworks]'
    python examples/openai_agents_tool.py
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from agents import FunctionTool, RunContextWrapper, function_tool
from agents.tool_context import ToolContext

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after


@dataclass
class Support:
    """The application's own context, passed to ``Runner.run(context=...)``."""

    agent: str


def build(guard: ag.Guard) -> FunctionTool:
    """The refund tool, each call guarded by ``guard``."""

    @function_tool
    @guard.requires_approval(timeout="30m")
    async def issue_refund(ctx: RunContextWrapper[Support], payment_id: str, amount: int) -> str:
        """Refund part of a payment.

        Args:
            payment_id: The payment to refund.
            amount: How much, in minor units (4900 is 49.00 GBP).
        """
        return f"refunded {amount} of {payment_id} for {ctx.context.agent}"

    return issue_refund


async def invoke(tool: FunctionTool, call_id: str, **args: Any) -> str:
    """What the runner does with a model's function call; returns what the model is sent."""
    arguments = json.dumps(args)
    context = ToolContext(
        Support(agent="support-bot"),
        tool_name=tool.name,
        tool_call_id=call_id,
        tool_arguments=arguments,
    )
    output = await tool.on_invoke_tool(context, arguments)
    return str(output)  # the runner sends str() of a plain value; a NotRun's is its message


async def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        issue_refund = build(guard)

        print(
            "approved:", await invoke(issue_refund, "call_1", payment_id="payment_123", amount=4900)
        )
        print(f"reviewer saw: {provider.requests()[0].arguments}")

        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        print(
            "denied:", await invoke(issue_refund, "call_2", payment_id="payment_456", amount=9900)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
