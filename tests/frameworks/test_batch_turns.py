"""Each framework integration sends its turn's id as API 1.3's ``batch``, with the real frameworks.

A scripted model asks for two reviewed calls in one turn, then two more in the
next; a provider on 127.0.0.1 that speaks 1.3 (``tests/support/hostile.py``)
approves each create at once and keeps its body. The calls of one turn share a
batch; the next turn's is another; ``batch=False`` sends none.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.support.frameworks import require_framework
from tests.support.hostile import HostileProvider, approved, hostile_guard

Hostile = Callable[..., HostileProvider]

#: The Guards a test made, closed after it (an async run's pools included).
_MADE: list[Any] = []


@pytest.fixture(autouse=True)
def _close_guards() -> Iterator[None]:
    yield
    while _MADE:
        _MADE.pop().close()


def _guard(p: HostileProvider) -> Any:
    _MADE.append(hostile_guard(p))
    return _MADE[-1]


def _approving(hostile: Hostile) -> HostileProvider:
    return hostile(unique_ids=True, create=lambda r, _: (201, approved(r)))


def _batches(p: HostileProvider) -> list[tuple[Any, Any]]:
    """Each create's ``(amount, batch)``, in amount order (calls of a turn may race)."""
    return sorted((body["arguments"]["amount"], body.get("batch")) for body in p.bodies)


# --------------------------------------------------------------------------- LangChain


def _langchain_agent(guard: Any, ran: list[Any], **middleware: Any) -> tuple[Any, Any]:
    require_framework("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    from approval_guard.langchain import ApprovalMiddleware

    class TwoTurns(BaseChatModel):
        """Turn 1 asks for refunds 1 and 2, turn 2 for 3 and 4, then it is done."""

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: Any = None,
            **kwargs: Any,
        ) -> ChatResult:
            done = sum(isinstance(m, ToolMessage) for m in messages)
            if done >= 4:
                reply = AIMessage(content="done")
            else:
                calls = [
                    {
                        "name": "issue_refund",
                        "args": {"payment_id": "p", "amount": amount},
                        "id": f"call_{amount}",
                        "type": "tool_call",
                    }
                    for amount in (done + 1, done + 2)
                ]
                reply = AIMessage(content="", tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=reply)])

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> TwoTurns:
            return self

        @property
        def _llm_type(self) -> str:
            return "two-turns"

    @tool
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment."""
        ran.append(amount)
        return f"refunded {amount}"

    agent = create_agent(
        TwoTurns(),
        tools=[issue_refund],
        middleware=[ApprovalMiddleware(guard, interrupt_on={"issue_refund": True}, **middleware)],
    )
    return agent, AIMessage


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_langchain_middleware_sends_the_ai_message_id_as_the_batch(
    hostile: Hostile, mode: str
) -> None:
    """The calls of one AIMessage share its id as their batch; the next turn has its own."""
    p = _approving(hostile)
    ran: list[Any] = []
    agent, ai_message = _langchain_agent(_guard(p), ran)
    ask = {"messages": [{"role": "user", "content": "refund"}]}
    state = agent.invoke(ask) if mode == "invoke" else asyncio.run(agent.ainvoke(ask))
    turns = [m.id for m in state["messages"] if isinstance(m, ai_message) and m.tool_calls]
    assert 2 == len(turns) and all(turns) and turns[0] != turns[1]
    assert [(1, turns[0]), (2, turns[0]), (3, turns[1]), (4, turns[1])] == _batches(p)
    assert [1, 2, 3, 4] == sorted(ran)


def test_langchain_middleware_with_batch_false_sends_none(hostile: Hostile) -> None:
    """For a provider older than 1.3: no batch field at all."""
    p = _approving(hostile)
    ran: list[Any] = []
    agent, _ = _langchain_agent(_guard(p), ran, batch=False)
    agent.invoke({"messages": [{"role": "user", "content": "refund"}]})
    assert [(1, None), (2, None), (3, None), (4, None)] == _batches(p)
    assert all("batch" not in body for body in p.bodies)


def test_an_application_s_own_batch_wins_over_the_middleware_s(hostile: Hostile) -> None:
    """harness_call(batch=...) around the run names the batch; the turn id does not replace it."""
    import approval_guard as ag

    p = _approving(hostile)
    agent, _ = _langchain_agent(_guard(p), [])
    with ag.harness_call(batch="ticket-42"):
        agent.invoke({"messages": [{"role": "user", "content": "refund"}]})
    assert {"ticket-42"} == {body["batch"] for body in p.bodies}


def test_langchain_middleware_sends_describe_s_sentence_as_the_context(hostile: Hostile) -> None:
    """``describe=`` among the middleware's options: each request carries its sentence."""
    p = _approving(hostile)
    agent, _ = _langchain_agent(
        _guard(p),
        [],
        describe=lambda args: f"Refund {args['amount']} of {args['payment_id']}.",
    )
    agent.invoke({"messages": [{"role": "user", "content": "refund"}]})
    assert sorted(body["context"] for body in p.bodies) == [
        f"Refund {n} of p." for n in (1, 2, 3, 4)
    ]


# --------------------------------------------------------------------------- Pydantic AI


def _pydantic_ai_run(guard: Any, ran: list[Any], **options: Any) -> Any:
    require_framework("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    from approval_guard.pydantic_ai import guarded

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(
            part.part_kind == "tool-return" for message in messages for part in message.parts
        )
        if done >= 4:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("issue_refund", {"payment_id": "p", "amount": n}, tool_call_id=f"c{n}")
                for n in (done + 1, done + 2)
            ]
        )

    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment."""
        ran.append(amount)
        return f"refunded {amount}"

    toolset = guarded(FunctionToolset([issue_refund]), guard, tools=["issue_refund"], **options)
    agent = Agent(FunctionModel(respond), toolsets=[toolset])
    return agent.run_sync("refund")


def test_pydantic_ai_toolset_sends_the_run_step_as_the_batch(hostile: Hostile) -> None:
    """``RUN_ID:STEP``: one model response's calls share it; the next response's differs."""
    p = _approving(hostile)
    ran: list[Any] = []
    result = _pydantic_ai_run(_guard(p), ran)
    batches = _batches(p)
    assert batches[0][1] == batches[1][1] != batches[2][1] == batches[3][1]
    run_id = result.run_id
    assert all(batch.startswith(f"{run_id}:") for _, batch in batches)
    assert [1, 2, 3, 4] == sorted(ran)


def test_pydantic_ai_toolset_with_batch_false_sends_none(hostile: Hostile) -> None:
    """For a provider older than 1.3: no batch field at all."""
    p = _approving(hostile)
    _pydantic_ai_run(_guard(p), [], batch=False)
    assert 4 == len(p.bodies)
    assert all("batch" not in body for body in p.bodies)


# --------------------------------------------------------------------------- OpenAI Agents


def test_openai_agents_example_sends_the_turn_as_the_batch(hostile: Hostile) -> None:
    """The example's tool passes its turn's id: the run's trace and model response count."""
    require_framework("agents")
    from examples import openai_agents_tool as example

    p = _approving(hostile)
    tool = example.build(_guard(p))
    outputs = asyncio.run(example.one_turn(tool, "turn-7", [("p_1", 1), ("p_2", 2)]))
    assert ["refunded 1 of p_1 for support-bot", "refunded 2 of p_2 for support-bot"] == outputs
    assert [(1, "turn-7"), (2, "turn-7")] == _batches(p)
    assert all(json.loads(raw)["batch"] == "turn-7" for raw in p.raw_bodies)


def test_openai_agents_runner_with_turn_ids_sends_each_response_id_as_the_batch(
    hostile: Hostile,
) -> None:
    """A real ``Runner.run`` with the example's ``TurnIds`` hooks and a scripted model."""
    require_framework("agents")
    from agents import Agent, ModelSettings, RunConfig, Runner, Usage
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from examples import openai_agents_tool as example

    class TwoTurns(Model):
        """Response resp_1 asks for refunds 1 and 2, resp_2 for 3 and 4, resp_3 ends."""

        def __init__(self) -> None:
            self.turn = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.turn += 1
            if self.turn > 2:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                done = ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
                return ModelResponse(output=[done], usage=Usage(), response_id="resp_3")
            calls = [
                ResponseFunctionToolCall(
                    type="function_call",
                    name="issue_refund",
                    call_id=f"call_{n}",
                    arguments=json.dumps({"payment_id": "p", "amount": n}),
                )
                for n in (2 * self.turn - 1, 2 * self.turn)
            ]
            return ModelResponse(output=list(calls), usage=Usage(), response_id=f"resp_{self.turn}")

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    p = _approving(hostile)
    agent = Agent[example.Support](
        name="support",
        model=TwoTurns(),
        tools=[example.build(_guard(p))],
        model_settings=ModelSettings(),
    )
    result = asyncio.run(
        Runner.run(
            agent,
            "refund",
            context=example.Support(agent="support-bot"),
            hooks=example.TurnIds(),
            run_config=RunConfig(tracing_disabled=True),
        )
    )
    assert "done" == result.final_output
    assert [(1, "resp_1"), (2, "resp_1"), (3, "resp_2"), (4, "resp_2")] == _batches(p)
