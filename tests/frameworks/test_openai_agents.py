"""A guarded function as an OpenAI Agents SDK function tool, invoked as the runner does."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.support.frameworks import require_framework

require_framework("agents")

from agents import FunctionTool, ItemHelpers, RunContextWrapper, function_tool  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402


class Deps:
    """What an application passes to Runner.run(context=...)."""

    user = "ann"


DENIED_ADVICE = "Do not retry the same call: tell the user it was denied, and ask how to go on."


def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> str:
    """Refund part of a payment.

    Args:
        payment_id: The payment to refund.
        amount: How much, in minor units.
        currency: The payment's currency.
    """
    return f"refunded {amount} {currency} of {payment_id}"


async def issue_refund_async(payment_id: str, amount: int, currency: str = "GBP") -> str:
    """Refund part of a payment.

    Args:
        payment_id: The payment to refund.
        amount: How much, in minor units.
        currency: The payment's currency.
    """
    await asyncio.sleep(0)
    return f"refunded {amount} {currency} of {payment_id}"


TOOLS = {"sync": issue_refund, "async": issue_refund_async}


def _invoke(function: FunctionTool, deps: Any = None, **args: Any) -> tuple[Any, str]:
    """Call the tool as the runner does: JSON arguments and a ToolContext.

    Returns the tool's output and the text the model is sent for it.
    """
    arguments = json.dumps(args)
    context = ToolContext(
        deps, tool_name=function.name, tool_call_id="call_1", tool_arguments=arguments
    )

    async def invoke() -> Any:
        return await function.on_invoke_tool(context, arguments)

    output = asyncio.run(invoke())
    call = ResponseFunctionToolCall(
        arguments=arguments, call_id="call_1", name=function.name, type="function_call"
    )
    sent = ItemHelpers.tool_call_output_item(call, output)["output"]
    assert isinstance(sent, str)
    return output, sent


@pytest.mark.parametrize("fn", TOOLS.values(), ids=TOOLS.keys())
def test_params_schema_equals_the_unguarded_one(guard: ag.Guard, fn: Any) -> None:
    """function_tool over the guarded function gives the model the same schema and text."""
    plain, guarded = function_tool(fn), function_tool(guard.requires_approval(timeout="1m")(fn))
    assert plain.params_json_schema == guarded.params_json_schema
    assert (plain.name, plain.description) == (guarded.name, guarded.description)


@pytest.mark.parametrize("fn", TOOLS.values(), ids=TOOLS.keys())
def test_tool_runs_after_approval(provider: LocalProvider, guard: ag.Guard, fn: Any) -> None:
    """Invoking the tool with JSON arguments waits for approval, then runs it."""
    provider.policy = approve_after(0.05)
    refund = function_tool(guard.requires_approval(timeout="1m")(fn))
    output, sent = _invoke(refund, payment_id="p_1", amount=4900)
    assert "refunded 4900 GBP of p_1" == output == sent
    [request] = provider.requests()
    assert {"payment_id": "p_1", "amount": 4900, "currency": "GBP"} == request.arguments


@pytest.mark.parametrize("fn", TOOLS.values(), ids=TOOLS.keys())
def test_not_run_reaches_the_model_as_its_sentence(
    provider: LocalProvider, guard: ag.Guard, fn: Any
) -> None:
    """A denied call's output is the NotRun, and the model is sent its message as text."""
    provider.policy = deny_after(0.05, "not this customer")
    refund = function_tool(guard.requires_approval(timeout="1m")(fn))
    output, sent = _invoke(refund, payment_id="p_1", amount=4900)
    assert isinstance(output, ag.NotRun)
    assert ag.Reason.DENIED == output.reason
    assert f"A person denied this call to {fn.__name__}: not this customer. {DENIED_ADVICE}" == sent


def refund_for_the_user(ctx: RunContextWrapper[Deps], payment_id: str) -> str:
    """Refund a payment for the run's user."""
    return f"{payment_id} for {ctx.context.user}"


async def refund_in_the_call(ctx: ToolContext[Deps], payment_id: str) -> str:
    """Refund a payment in the runner's tool call."""
    return f"{payment_id} in {ctx.tool_call_id}"


CONTEXT_TOOLS = {
    "RunContextWrapper-sync": (refund_for_the_user, "p_1 for ann"),
    "ToolContext-async": (refund_in_the_call, "p_1 in call_1"),
}


@pytest.mark.parametrize(("fn", "expected"), CONTEXT_TOOLS.values(), ids=CONTEXT_TOOLS.keys())
def test_injected_context_is_not_sent_for_approval(
    provider: LocalProvider, guard: ag.Guard, fn: Any, expected: str
) -> None:
    """A RunContextWrapper or ToolContext parameter reaches the tool but not the reviewer."""
    provider.policy = approve_after(0.05)
    refund = function_tool(guard.requires_approval(timeout="1m")(fn))
    assert ["payment_id"] == list(refund.params_json_schema["properties"])
    output, _ = _invoke(refund, Deps(), payment_id="p_1")
    assert expected == output
    [request] = provider.requests()
    assert {"payment_id": "p_1"} == request.arguments
