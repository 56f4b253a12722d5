"""A Pydantic AI agent whose refund tool waits for a person's approval.

``guarded(toolset, guard, tools=[...])`` wraps the agent's toolset: every call
of ``issue_refund`` becomes an approval request, runs only once a person
approves it (the approval's expiry checked right before the call), and a call
that did not run gives the model one sentence saying why. The tool's
``RunContext`` reaches it and is never shown to the reviewer.

Runs without a model key or a provider of your own: Pydantic AI's
``FunctionModel`` plays the model (it asks for the refund the prompt names, then
repeats what the tool returned), and a local provider approves, then denies,
every request a moment after it appears::

    pip install 'approval-guard[pydantic-ai,server]'
    python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import approval_guard as ag
from approval_guard.pydantic_ai import guarded
from approval_guard.testing import LocalProvider, approve_after, deny_after


def issue_refund(ctx: RunContext[str], payment_id: str, amount: int) -> str:
    """Refund part of a payment; amount is in minor units (4900 is 49.00 GBP)."""
    return f"refunded {amount} of {payment_id} for {ctx.deps}"


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for a model: "refund 4900 of payment_123" -> issue_refund(payment_123, 4900)."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(str(part.content))])
        if isinstance(part, UserPromptPart) and isinstance(part.content, str):
            _, amount, _, payment_id = part.content.split()
            args = {"payment_id": payment_id, "amount": int(amount)}
            return ModelResponse(parts=[ToolCallPart("issue_refund", args)])
    return ModelResponse(parts=[TextPart("I have nothing to do.")])


def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        toolset = guarded(FunctionToolset([issue_refund]), guard, tools=["issue_refund"])
        agent = Agent(FunctionModel(scripted_model), deps_type=str, toolsets=[toolset])

        result = agent.run_sync("refund 4900 of payment_123", deps="support-bot")
        print(f"approved: {result.output}")
        print(f"reviewer saw: {provider.requests()[0].arguments}")

        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        result = agent.run_sync("refund 9900 of payment_456", deps="support-bot")
        print(f"denied: {result.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
