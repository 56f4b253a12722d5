"""A LangChain agent (``create_agent``) whose refund tool waits for a person's approval.

``ApprovalMiddleware`` takes ``HumanInTheLoopMiddleware``'s ``interrupt_on``,
but its decisions come from the approval provider: the tool call waits while a
person decides, then runs (as sent, or with the reviewer's edited arguments) or
gives the model a ``ToolMessage`` saying why it did not run. No checkpointer,
no interrupt to resume.

Runs without a model key or a provider of your own: a scripted chat model asks
for the refund the prompt names, then repeats what the tool returned, and a
local provider approves, then denies, every request a moment after it appears::

    pip install 'approval-guard[langchain,server]'
    python examples/langchain_agent.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

import approval_guard as ag
from approval_guard.langchain import ApprovalMiddleware
from approval_guard.testing import LocalProvider, approve_after, deny_after


@tool
def issue_refund(payment_id: str, amount: int) -> str:
    """Refund part of a payment; amount is in minor units (4900 is 49.00 GBP)."""
    return f"refunded {amount} of {payment_id} for support-bot"


class ScriptedModel(BaseChatModel):
    """Stands in for a model: "refund 4900 of payment_123" -> issue_refund(payment_123, 4900)."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=str(last.content))
        elif isinstance(last, HumanMessage):
            _, amount, _, payment_id = str(last.content).split()
            call = {"payment_id": payment_id, "amount": int(amount)}
            reply = AIMessage(
                content="", tool_calls=[{"name": "issue_refund", "args": call, "id": "call_1"}]
            )
        else:
            reply = AIMessage(content="I have nothing to do.")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted"


def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        middleware = ApprovalMiddleware(
            guard,
            interrupt_on={"issue_refund": {"allowed_decisions": ["approve", "edit", "reject"]}},
            timeout="30m",
        )
        agent = create_agent(ScriptedModel(), tools=[issue_refund], middleware=[middleware])

        state = agent.invoke({"messages": [HumanMessage("refund 4900 of payment_123")]})
        print(f"approved: {state['messages'][-1].content}")
        print(f"reviewer saw: {provider.requests()[0].arguments}")

        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        state = agent.invoke({"messages": [HumanMessage("refund 9900 of payment_456")]})
        print(f"denied: {state['messages'][-1].content}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
