"""A guarded function as a LangChain tool (langchain-core), called as an agent would, no model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

import pytest

from tests.frameworks._require import require_framework

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

BUILDERS: dict[str, Callable[[Callable[..., Any]], BaseTool]] = {
    "tool": lambda fn: tool(fn),
    "StructuredTool.from_function": lambda fn: StructuredTool.from_function(fn),
}


def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
    """Refund part of a payment; amount is in minor units."""
    return {"refunded": amount, "payment_id": payment_id, "currency": currency}


async def issue_refund_async(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
    """Refund part of a payment; amount is in minor units."""
    await asyncio.sleep(0)
    return {"refunded": amount, "payment_id": payment_id, "currency": currency}


def _async_tool(fn: Callable[..., Any]) -> BaseTool:
    return StructuredTool.from_function(coroutine=fn)


def _call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """The ToolCall an agent hands to a tool (what a chat model's tool_calls hold)."""
    return {"type": "tool_call", "id": call_id, "name": name, "args": args}


@pytest.mark.parametrize("build", BUILDERS.values(), ids=BUILDERS.keys())
def test_args_schema_equals_the_unguarded_one(guard: ag.Guard, build: Any) -> None:
    """The tool built over the guarded function shows the model the same schema."""
    guarded = guard.requires_approval(timeout="1m")(issue_refund)
    plain_tool, guarded_tool = build(issue_refund), build(guarded)
    assert (
        plain_tool.args_schema.model_json_schema() == guarded_tool.args_schema.model_json_schema()
    )
    assert plain_tool.tool_call_schema.model_json_schema() == (
        guarded_tool.tool_call_schema.model_json_schema()
    )
    assert (plain_tool.name, plain_tool.description) == (
        guarded_tool.name,
        guarded_tool.description,
    )


def test_async_args_schema_equals_the_unguarded_one(guard: ag.Guard) -> None:
    """An async guarded function gives the same schema as the unguarded coroutine."""
    guarded = guard.requires_approval(timeout="1m")(issue_refund_async)
    assert _async_tool(issue_refund_async).args_schema.model_json_schema() == (
        _async_tool(guarded).args_schema.model_json_schema()
    )


@pytest.mark.parametrize("build", BUILDERS.values(), ids=BUILDERS.keys())
def test_tool_runs_after_approval(
    approval_provider: LocalProvider, guard: ag.Guard, build: Any
) -> None:
    """Invoking the tool with a tool call waits for approval, runs, and returns a ToolMessage."""
    approval_provider.policy = approve_after(0.05)
    refund_tool = build(guard.requires_approval(timeout="1m")(issue_refund))
    message = refund_tool.invoke(_call("issue_refund", "call_1", payment_id="p_1", amount=4900))
    assert isinstance(message, ToolMessage)
    assert "success" == message.status
    assert '{"refunded": 4900, "payment_id": "p_1", "currency": "GBP"}' == message.content
    [request] = approval_provider.requests()
    assert {"payment_id": "p_1", "amount": 4900, "currency": "GBP"} == request.arguments


def test_not_run_comes_back_as_a_readable_tool_message(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """A denied call gives the model a ToolMessage whose content is the NotRun's sentence."""
    approval_provider.policy = deny_after(0.05, "refunds over 40 GBP need a manager")
    calls: list[str] = []

    @tool
    @guard.requires_approval(timeout="1m")
    def refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment."""
        calls.append(payment_id)
        return "refunded"

    message = refund.invoke(_call("refund", "call_1", payment_id="p_1", amount=4900))
    assert isinstance(message, ToolMessage)
    assert (
        "A person denied this call to refund: refunds over 40 GBP need a manager" == message.content
    )
    assert "call_1" == message.tool_call_id
    assert [] == calls


def test_async_tool_runs_after_approval_with_ainvoke(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """An async guarded tool, awaited through ainvoke, runs once approved."""
    approval_provider.policy = approve_after(0.05)
    refund_tool = _async_tool(guard.requires_approval(timeout="1m")(issue_refund_async))
    message = asyncio.run(
        refund_tool.ainvoke(_call("issue_refund_async", "call_1", payment_id="p_1", amount=10))
    )
    assert isinstance(message, ToolMessage)
    assert '{"refunded": 10, "payment_id": "p_1", "currency": "GBP"}' == message.content


def test_async_not_run_comes_back_as_a_readable_tool_message(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """A denied async tool gives ainvoke a ToolMessage with the NotRun's sentence."""
    approval_provider.policy = deny_after(0.05, "no")

    @tool
    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        """Refund a payment."""
        return "refunded"

    message = asyncio.run(refund.ainvoke(_call("refund", "call_1", payment_id="p_1")))
    assert isinstance(message, ToolMessage)
    assert "A person denied this call to refund: no" == message.content


def test_injected_config_and_call_id_are_not_sent_for_approval(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """RunnableConfig and InjectedToolCallId parameters reach the tool, not the reviewer."""
    approval_provider.policy = approve_after(0.05)

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
    [request] = approval_provider.requests()
    assert {"payment_id": "p_1"} == request.arguments
