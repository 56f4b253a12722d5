"""A guarded function as a LangChain tool (langchain-core), called as an agent would, no model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

import attrs
import pytest

from tests.support.frameworks import require_framework

require_framework("langchain_core")

from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.tools import (  # noqa: E402
    BaseTool,
    InjectedToolCallId,
    StructuredTool,
    tool,
)

import approval_guard as ag  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402


def _refund(ran: list[str], *, coroutine: bool) -> Callable[..., Any]:
    """``issue_refund`` as a plain or an ``async`` function, recording each run in ``ran``."""

    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        """Refund part of a payment; amount is in minor units."""
        ran.append(payment_id)
        return {"refunded": amount, "payment_id": payment_id, "currency": currency}

    async def issue_refund_async(
        payment_id: str, amount: int, currency: str = "GBP"
    ) -> dict[str, Any]:
        """Refund part of a payment; amount is in minor units."""
        await asyncio.sleep(0)
        return issue_refund(payment_id, amount, currency)

    return issue_refund_async if coroutine else issue_refund


def _invoke(built: BaseTool, call: dict[str, Any]) -> Any:
    """What an agent does with a plain tool: invoke."""
    return built.invoke(call)


def _ainvoke(built: BaseTool, call: dict[str, Any]) -> Any:
    """What an async agent does with a tool: await ainvoke."""
    return asyncio.run(built.ainvoke(call))


@attrs.frozen
class Flavour:
    """One way to make a LangChain tool from a function and have the agent call it."""

    coroutine: bool
    build: Callable[[Callable[..., Any]], BaseTool]
    run: Callable[[BaseTool, dict[str, Any]], Any]

    def tool(self, ran: list[str], guard: ag.Guard | None = None) -> BaseTool:
        """The refund tool of this flavour, guarded when ``guard`` is given."""
        fn = _refund(ran, coroutine=self.coroutine)
        return self.build(fn if guard is None else guard.requires_approval(timeout="1m")(fn))

    def agent_calls(self, guard: ag.Guard, ran: list[str]) -> tuple[str, ToolMessage]:
        """The guarded tool called as an agent would (call_1: refund 4900 of p_1).

        Returns the tool's name and the ToolMessage the model gets back.
        """
        built = self.tool(ran, guard)
        message = self.run(built, _call(built.name, "call_1", payment_id="p_1", amount=4900))
        assert isinstance(message, ToolMessage)
        return built.name, message


FLAVOURS = {
    "tool": Flavour(False, tool, _invoke),
    "StructuredTool.from_function": Flavour(False, StructuredTool.from_function, _invoke),
    "async-tool": Flavour(True, tool, _ainvoke),
    "async-StructuredTool.from_function(coroutine=)": Flavour(
        True, lambda fn: StructuredTool.from_function(coroutine=fn), _ainvoke
    ),
}


@pytest.fixture(params=list(FLAVOURS.values()), ids=list(FLAVOURS))
def flavour(request: pytest.FixtureRequest) -> Flavour:
    """Each way to build the tool (plain and async functions), and its invoke or ainvoke."""
    chosen: Flavour = request.param
    return chosen


def _call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """The ToolCall an agent hands to a tool (what a chat model's tool_calls hold)."""
    return {"type": "tool_call", "id": call_id, "name": name, "args": args}


def _schema(model: Any) -> Any:
    """A tool's schema model as JSON Schema (a pydantic model class, for these tools)."""
    return model.model_json_schema()


def test_args_schema_equals_the_unguarded_one(guard: ag.Guard, flavour: Flavour) -> None:
    """The tool built over the guarded function shows the model the same schema."""
    plain_tool, guarded_tool = flavour.tool([]), flavour.tool([], guard)
    assert _schema(plain_tool.args_schema) == _schema(guarded_tool.args_schema)
    assert _schema(plain_tool.tool_call_schema) == _schema(guarded_tool.tool_call_schema)
    assert (plain_tool.name, plain_tool.description) == (
        guarded_tool.name,
        guarded_tool.description,
    )


def test_tool_runs_after_approval(
    provider: LocalProvider, guard: ag.Guard, flavour: Flavour
) -> None:
    """Invoking the tool with a tool call waits for approval, runs, and returns a ToolMessage."""
    provider.policy = approve_after(0.05)
    ran: list[str] = []
    _, message = flavour.agent_calls(guard, ran)
    assert "success" == message.status
    assert '{"refunded": 4900, "payment_id": "p_1", "currency": "GBP"}' == message.content
    assert ["p_1"] == ran
    [request] = provider.requests()
    assert {"payment_id": "p_1", "amount": 4900, "currency": "GBP"} == request.arguments


DENIED_ADVICE = "Do not retry the same call: tell the user it was denied, and ask how to go on."


def test_not_run_comes_back_as_a_readable_tool_message(
    provider: LocalProvider, guard: ag.Guard, flavour: Flavour
) -> None:
    """A denied call gives the model a ToolMessage whose content is the NotRun's sentence."""
    provider.policy = deny_after(0.05, "refunds over 40 GBP need a manager")
    ran: list[str] = []
    name, message = flavour.agent_calls(guard, ran)
    assert (
        f"A person denied this call to {name}: refunds over 40 GBP need a manager. {DENIED_ADVICE}"
        == message.content
    )
    assert "call_1" == message.tool_call_id
    assert [] == ran


def test_injected_config_and_call_id_are_not_sent_for_approval(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """RunnableConfig and InjectedToolCallId parameters reach the tool, not the reviewer."""
    provider.policy = approve_after(0.05)

    @tool
    @guard.requires_approval(timeout="1m")
    def refund(
        payment_id: str,
        config: RunnableConfig,
        call_id: Annotated[str, InjectedToolCallId],
    ) -> str:
        """Refund a payment."""
        return f"{payment_id} for {config['metadata']['user']} in {call_id}"

    message = refund.invoke(
        _call("refund", "call_7", payment_id="p_1"), config={"metadata": {"user": "ann"}}
    )
    assert isinstance(message, ToolMessage)
    assert "p_1 for ann in call_7" == message.content
    [request] = provider.requests()
    assert {"payment_id": "p_1"} == request.arguments
