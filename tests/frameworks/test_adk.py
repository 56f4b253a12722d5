"""approval_guard.adk: ADK's own Runner with a scripted model, both forms, every outcome."""

from __future__ import annotations

import asyncio
import re
import types
from typing import Any

import pytest

from tests.support.frameworks import require_framework

require_framework("google.adk")

from google.adk.tools.function_tool import FunctionTool  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard import adk  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402
from tests.support.adk_model import ScriptedModel, run_agent  # noqa: E402

ARGS = {"payment_id": "p_1", "amount": 4900}


def _refund(ran: list[tuple[str, int, str]]) -> Any:
    def issue_refund(payment_id: str, amount: int, tool_context: ToolContext) -> dict:
        """Refund part of a payment; amount is in minor units."""
        ran.append((payment_id, amount, type(tool_context).__name__))
        return {"refunded": amount, "payment_id": payment_id}

    return issue_refund


def _guarded_tool(guard: ag.Guard, ran: list[Any]) -> dict[str, Any]:
    return {"tools": [adk.guarded_tool(_refund(ran), guard, timeout="1m", editable=("amount",))]}


def _callback(guard: ag.Guard, ran: list[Any]) -> dict[str, Any]:
    return {
        "tools": [_refund(ran)],
        "before_tool_callback": adk.before_tool_callback(
            guard, tools={"issue_refund": {"timeout": "1m", "editable": ("amount",)}}
        ),
    }


FORMS = {"guarded_tool": _guarded_tool, "before_tool_callback": _callback}


@pytest.fixture(params=list(FORMS.values()), ids=list(FORMS))
def form(request: pytest.FixtureRequest) -> Any:
    """Each way to guard the tool: the FunctionTool itself, or the agent's callback."""
    return request.param


def _agent_turn(guard: ag.Guard, form: Any, ran: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    model = ScriptedModel(model="scripted", tool="issue_refund", args=dict(ARGS), saw=[])
    text = asyncio.run(run_agent(model, **form(guard, ran)))
    return text, model.saw


def test_approved_edit_runs_once_with_the_edited_amount(
    provider: LocalProvider, guard: ag.Guard, form: Any
) -> None:
    """The reviewer's edit is what the function gets, ToolContext injected, never sent."""
    provider.policy = _edit_amount
    ran: list[Any] = []
    _, saw = _agent_turn(guard, form, ran)
    assert [("p_1", 100, "Context")] == ran
    assert [{"refunded": 100, "payment_id": "p_1"}] == saw
    [request] = provider.requests()
    assert (ARGS, ("amount",)) == (request.arguments, request.editable)


def _edit_amount(provider: LocalProvider, request: Any) -> None:
    provider.approve(request.id, arguments={**request.arguments, "amount": 100})


def _expired(provider: LocalProvider, request: Any) -> None:
    provider.approve(request.id, valid_for=0)


def _cancel(provider: LocalProvider, request: Any) -> None:
    provider.cancel(request.id, "withdrawn")


OUTCOMES = {
    "denied": (deny_after(0.05, "over the limit"), "denied", "A person denied this call"),
    "expired": (_expired, "approval_expired", "expired at"),
    "cancelled": (_cancel, "cancelled", "was cancelled at the provider"),
    # Under load the request may have expired at the provider by the last look: either
    # sentence says nobody denied it.
    "no decision": (None, "not_obtained", "it was not denied|Nobody denied it"),
}


@pytest.mark.parametrize(("policy", "reason", "sentence"), OUTCOMES.values(), ids=OUTCOMES.keys())
def test_every_other_outcome_skips_the_tool_and_tells_the_model(
    provider: LocalProvider, form: Any, policy: Any, reason: str, sentence: str
) -> None:
    """Denial, expiry, cancellation, no decision: not run; the model's response says why."""
    provider.policy = policy
    guard = ag.Guard(
        base_url=provider.url,
        credential=provider.credential,
        harness_limit="3s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
    )
    ran: list[Any] = []
    _, saw = _agent_turn(guard, form, ran)
    guard.close()
    assert [] == ran
    [response] = saw
    assert reason == response["reason"]
    assert re.search(sentence, response["error"]), response["error"]


def test_the_declaration_is_the_unguarded_ones(guard: ag.Guard) -> None:
    """The model sees the same function declaration, without the ToolContext."""
    plain = FunctionTool(_refund([]))._get_declaration()
    guarded = adk.guarded_tool(FunctionTool(_refund([])), guard)._get_declaration()
    assert plain is not None and guarded is not None
    assert plain.model_dump() == guarded.model_dump()
    assert ["amount", "payment_id"] == sorted(guarded.parameters_json_schema["properties"])


def test_an_unannotated_tool_context_is_not_sent(provider: LocalProvider, guard: ag.Guard) -> None:
    """ADK injects tool_context by name: it is left out of the request too."""
    provider.policy = deny_after(0.05)
    ran: list[Any] = []

    def issue_refund(payment_id: str, amount: int, tool_context) -> dict:  # type: ignore[no-untyped-def]
        """Refund part of a payment."""
        ran.append(payment_id)
        return {}

    model = ScriptedModel(model="scripted", tool="issue_refund", args=dict(ARGS), saw=[])
    asyncio.run(run_agent(model, tools=[adk.guarded_tool(issue_refund, guard)]))
    [request] = provider.requests()
    assert ARGS == request.arguments
    assert [] == ran


def test_a_tool_context_whose_annotation_cannot_be_resolved_is_recognised_by_name(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """``tool_context: ToolContext`` imported only inside a factory: ADK's by name, not sent."""
    provider.policy = approve_after(0.05)
    ran: list[Any] = []

    def factory() -> Any:
        from google.adk.tools.tool_context import ToolContext as FactoryToolContext

        def issue_refund(payment_id: str, amount: int, tool_context: FactoryToolContext) -> dict:
            """Refund part of a payment."""
            ran.append((payment_id, amount, type(tool_context).__name__))
            return {"refunded": amount}

        return issue_refund

    model = ScriptedModel(model="scripted", tool="issue_refund", args=dict(ARGS), saw=[])
    asyncio.run(run_agent(model, tools=[adk.guarded_tool(factory(), guard)]))

    [request] = provider.requests()
    assert ARGS == request.arguments
    assert [("p_1", 4900, ToolContext.__name__)] == ran


def test_unlisted_tools_run_unasked_through_the_callback(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """A tool the callback does not list runs as ADK would run it; nothing is sent."""
    ran: list[Any] = []
    callback = adk.before_tool_callback(guard, tools={"other_tool": True})
    model = ScriptedModel(model="scripted", tool="issue_refund", args=dict(ARGS), saw=[])
    asyncio.run(run_agent(model, tools=[_refund(ran)], before_tool_callback=callback))
    assert [("p_1", 4900, "Context")] == ran
    assert [] == provider.requests()


@pytest.mark.parametrize(
    "make",
    [
        lambda g: adk.guarded_tool(_refund([]), g, timeout="0s"),
        lambda g: adk.guarded_tool(_refund([]), g, editable=("nope",)),
        lambda g: adk.guarded_tool(object(), g),
        lambda g: adk.before_tool_callback(g, tools={}),
        lambda g: adk.before_tool_callback(g, tools={"t": {"exclude": ("a",)}}),
        lambda g: adk.before_tool_callback(g, tools={"t": True}, unlisted="maybe"),  # type: ignore[arg-type]
    ],
    ids=["timeout", "editable", "not-a-tool", "no-tools", "exclude", "unlisted"],
)
def test_bad_options_raise_when_the_tool_is_made(guard: ag.Guard, make: Any) -> None:
    """Every option is checked when the tool or the callback is made."""
    with pytest.raises((ag.ConfigurationError, TypeError)):
        make(guard)


def test_the_callback_redacts_what_it_is_told_to(provider: LocalProvider, guard: ag.Guard) -> None:
    """redact= in the callback's tools: the reviewer sees a marker, the tool the value."""
    provider.policy = approve_after(0.05)
    ran: list[Any] = []
    callback = adk.before_tool_callback(guard, tools={"issue_refund": {"redact": ("payment_id",)}})
    model = ScriptedModel(model="scripted", tool="issue_refund", args=dict(ARGS), saw=[])
    asyncio.run(run_agent(model, tools=[_refund(ran)], before_tool_callback=callback))
    assert [("p_1", 4900, "Context")] == ran
    [request] = provider.requests()
    assert "p_1" not in str(request.arguments)
    assert 4900 == request.arguments["amount"]


def test_a_plain_function_waits_without_blocking_the_event_loop(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """While a sync tool waits for approval, other tasks on ADK's loop keep running."""
    provider.policy = approve_after(0.6)
    ran: list[Any] = []
    model = ScriptedModel(model="scripted", tool="issue_refund", args=dict(ARGS), saw=[])

    async def both() -> int:
        ticks = 0
        agent = asyncio.ensure_future(
            run_agent(model, tools=[adk.guarded_tool(_refund(ran), guard)])
        )
        while not agent.done():
            await asyncio.sleep(0.02)
            ticks += 1
        await agent
        return ticks

    ticks = asyncio.run(both())
    assert [("p_1", 4900, "Context")] == ran
    assert ticks >= 10


def test_the_callback_allows_one_function_call_at_most_once(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """Asked twice for one function call id, the second answer skips the tool."""
    provider.policy = approve_after(0.05)
    callback = adk.before_tool_callback(guard, tools={"issue_refund": True})
    refund = FunctionTool(_refund([]))
    context = types.SimpleNamespace(function_call_id="call_same")

    async def twice() -> list[Any]:
        return [await callback(refund, dict(ARGS), context) for _ in range(2)]

    first, second = asyncio.run(twice())
    assert first is None
    assert "already_executed" == second["reason"]
    assert 1 == len(provider.requests())
