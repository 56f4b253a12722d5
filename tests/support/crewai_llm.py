"""A scripted CrewAI LLM: it asks for one tool call, then answers with what it observed.

A ``BaseLLM`` subclass, so CrewAI's own agent executor parses the action, runs
the tool through its tool-usage path and hands the observation back, with no
network and no key. Set ``CREWAI_DISABLE_TELEMETRY`` and ``OTEL_SDK_DISABLED``
before importing CrewAI (tests/frameworks/test_crewai.py does).
"""

from __future__ import annotations

import json
from typing import Any

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM


class ScriptedLLM(BaseLLM):
    """First call: use ``tool`` with ``args``; second: the observation as the final answer."""

    def __init__(self, tool: str, args: dict[str, Any]) -> None:
        super().__init__(model="scripted")
        self.tool = tool
        self.args = args
        self.calls = 0
        #: What CrewAI handed the model as the tool's observation.
        self.observed: list[str] = []

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.calls += 1
        if self.calls == 1:
            return (
                "Thought: I should use the tool.\n"
                f"Action: {self.tool}\n"
                f"Action Input: {json.dumps(self.args)}"
            )
        text = messages if isinstance(messages, str) else str(messages[-1].get("content", ""))
        observation = text.split("Observation:")[-1].strip()
        self.observed.append(observation)
        return f"Thought: I now know the final answer\nFinal Answer: {observation}"

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


def run_crew(llm: ScriptedLLM, tools: list[Any]) -> str:
    """One task for one agent with ``tools``, kicked off; the crew's final answer."""
    agent = Agent(
        role="support",
        goal="refund customers",
        backstory="a support agent",
        llm=llm,
        tools=tools,
        allow_delegation=False,
        max_iter=3,
        verbose=False,
    )
    task = Task(description="Refund payment p_1", expected_output="the result", agent=agent)
    return str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff())
