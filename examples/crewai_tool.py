"""A CrewAI crew whose refund tool waits for a person: ``guarded``.

``approval_guard.crewai.guarded(tool, guard)`` is a copy of a CrewAI tool (what
``@tool`` made, or any ``BaseTool``) whose every run is an approval request; the
model sees the same name, description and arguments. A run that did not happen
returns one sentence, which CrewAI hands the model as the tool's observation.

Runs without a model key or a provider of your own: the agent's LLM is a
scripted ``BaseLLM`` that asks for one refund and then answers with what it
observed, the crew's own agent loop runs the tool, and a local provider approves
(then denies) each request a moment after it appears. CrewAI's telemetry and
tracing are turned off before it is imported, so nothing leaves the machine::

    pip install 'approval-guard[crewai]'
    python examples/crewai_tool.py
"""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("CREWAI_TESTING", "true")  # no "view your traces?" prompt

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool

import approval_guard as ag
from approval_guard.crewai import guarded
from approval_guard.testing import LocalProvider, approve_after, deny_after


@tool("issue_refund")
def issue_refund(payment_id: str, amount: int) -> str:
    """Refund part of a payment; amount is in minor units (4900 is 49.00 GBP)."""
    return f"refunded {amount} of {payment_id}"


class OneRefund(BaseLLM):
    """A stand-in LLM: use issue_refund with ``args``, then answer with the observation."""

    def __init__(self, args: dict[str, Any]) -> None:
        super().__init__(model="scripted")
        self.args = args
        self.turns = 0

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.turns += 1
        if self.turns == 1:
            return (
                "Thought: I should refund the payment.\nAction: issue_refund\n"
                f"Action Input: {json.dumps(self.args)}"
            )
        seen = messages if isinstance(messages, str) else str(messages[-1].get("content", ""))
        return f"Thought: done\nFinal Answer: {seen.split('Observation:')[-1].strip()}"

    def supports_function_calling(self) -> bool:
        return False


def ask(guard: ag.Guard, **args: Any) -> str:
    """One task for one agent with the guarded tool; the crew's final answer."""
    agent = Agent(
        role="support",
        goal="refund customers",
        backstory="a support agent",
        llm=OneRefund(args),
        tools=[guarded(issue_refund, guard, timeout="30m")],
        max_iter=3,
    )
    task = Task(description="Refund the payment", expected_output="what happened", agent=agent)
    return str(Crew(agents=[agent], tasks=[task]).kickoff())


def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        print(f"approved: {ask(guard, payment_id='payment_123', amount=4900)}")
        print(f"reviewer saw: {provider.requests()[0].arguments}")
        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        print(f"denied: {ask(guard, payment_id='payment_456', amount=9900)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
