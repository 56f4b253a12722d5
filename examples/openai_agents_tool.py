"""A guarded refund tool as an OpenAI Agents SDK function tool, invoked as the runner does.

``function_tool`` wraps the guarded ``async def`` like any other: the schema the
model sees is the function's own, the run context parameter is filled in by the
SDK (and, recognised by its type, never sent for approval), and a call that did
not run returns a ``NotRun`` that the runner sends to the model as its message.

Each request also carries its turn's id as API 1.3's ``batch``, so a reviewer
sees the calls of one model response together. The SDK gives a tool no turn
id of its own, so ``TurnIds`` (run hooks: ``Runner.run(..., hooks=TurnIds())``)
keeps the id of the model response the calls came from in the run's context,
and the tool passes it with ``harness_call(batch=...)`` (for a provider older
than 1.3, leave the hooks out: no batch is sent).

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

from agents import Agent, FunctionTool, RunContextWrapper, RunHooks, function_tool
from agents.items import ModelResponse
from agents.tool_context import ToolContext

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after


@dataclass
class Support:
    """The application's own context, passed to ``Runner.run(context=...)``."""

    agent: str
    #: The model response (the turn) whose tool calls run now; set by TurnIds.
    turn: str | None = None


class TurnIds(RunHooks[Support]):
    """Keeps the id of the model response whose tool calls run next: the turn's id."""

    async def on_llm_end(
        self, context: RunContextWrapper[Support], agent: Agent[Support], response: ModelResponse
    ) -> None:
        context.context.turn = response.response_id


def build(guard: ag.Guard) -> FunctionTool:
    """The refund tool, each call guarded by ``guard`` and sent in its turn's batch."""

    @guard.requires_approval(timeout="30m", tool="issue_refund")
    async def refund(ctx: RunContextWrapper[Support], payment_id: str, amount: int) -> str:
        return f"refunded {amount} of {payment_id} for {ctx.context.agent}"

    @function_tool
    async def issue_refund(
        ctx: RunContextWrapper[Support], payment_id: str, amount: int
    ) -> str | ag.NotRun:
        """Refund part of a payment.

        Args:
            payment_id: The payment to refund.
            amount: How much, in minor units (4900 is 49.00 GBP).
        """
        with ag.harness_call(batch=ctx.context.turn):  # None: no batch
            return await refund(ctx, payment_id, amount)

    return issue_refund


async def invoke(tool: FunctionTool, call_id: str, support: Support, **args: Any) -> str:
    """What the runner does with a model's function call; returns what the model is sent."""
    arguments = json.dumps(args)
    context = ToolContext(
        support, tool_name=tool.name, tool_call_id=call_id, tool_arguments=arguments
    )
    output = await tool.on_invoke_tool(context, arguments)
    return str(output)  # the runner sends str() of a plain value; a NotRun's is its message


async def one_turn(
    tool: FunctionTool, turn: str, calls: list[tuple[str, int]], agent: str = "support-bot"
) -> list[str]:
    """One model response (``turn``) asking for several refunds, run as the runner runs them."""
    support = Support(agent=agent, turn=turn)  # what TurnIds sets after the model answers
    return list(
        await asyncio.gather(
            *(
                invoke(tool, f"call_{n}", support, payment_id=payment_id, amount=amount)
                for n, (payment_id, amount) in enumerate(calls)
            )
        )
    )


async def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        issue_refund = build(guard)
        support = Support(agent="support-bot")  # no turn id: this provider may be older than 1.3

        print(
            "approved:",
            await invoke(issue_refund, "call_1", support, payment_id="payment_123", amount=4900),
        )
        print(f"reviewer saw: {provider.requests()[0].arguments}")

        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        print(
            "denied:",
            await invoke(issue_refund, "call_2", support, payment_id="payment_456", amount=9900),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
