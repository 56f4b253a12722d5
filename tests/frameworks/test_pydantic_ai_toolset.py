"""guarded(toolset, guard, tools=...) driven by Pydantic AI's own agent loop (FunctionModel)."""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from tests.frameworks.pydantic_ai_support import Script
from tests.support.agents import (
    Refunds,
    approve_edited,
    approve_expired,
    cancel_at_provider,
    wait_for_status,
)
from tests.support.frameworks import require_framework

require_framework("pydantic_ai")

from pydantic_ai import Agent, ModelRetry  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard.pydantic_ai import as_model_retry, guarded  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402

CALL = {"payment_id": "p_1", "amount": 4900}


def _toolset(refunds: Refunds) -> FunctionToolset[None]:
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment; amount is in minor units."""
        return refunds.run(payment_id=payment_id, amount=amount)

    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        refunds.runs.append({"lookup": order_id})
        return f"order {order_id}"

    return FunctionToolset([issue_refund, lookup_order])


def _run(toolset: Any, script: Script) -> str:
    agent = Agent(script.model(), toolsets=[toolset])
    output: str = agent.run_sync("refund payment p_1").output
    return output


@pytest.fixture
def events() -> list[Any]:
    return []


@pytest.fixture
def refunds() -> Refunds:
    return Refunds()


def test_an_approved_call_runs_once_with_what_the_reviewer_saw(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds
) -> None:
    """Approval: the tool ran once with the model's arguments, and the model read its result."""
    provider.policy = approve_after(0.05)
    script = Script("issue_refund", CALL)
    _run(guarded(_toolset(refunds), guard, tools=["issue_refund"], timeout="1m"), script)
    assert [CALL] == refunds.runs
    assert ["refunded 4900 of p_1"] == script.seen
    [request] = provider.requests()
    assert ("issue_refund", CALL) == (request.tool, request.arguments)


def test_an_edit_runs_the_tool_with_the_edited_value_validated_by_its_schema(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds
) -> None:
    """An edited approval runs the tool once, with the edit converted by the tool's schema."""
    provider.policy = approve_edited(amount=100)
    script = Script("issue_refund", CALL)
    toolset = guarded(_toolset(refunds), guard, tools={"issue_refund": {"editable": ["amount"]}})
    _run(toolset, script)
    assert [{"payment_id": "p_1", "amount": 100}] == refunds.runs
    assert ["refunded 100 of p_1"] == script.seen
    assert ("amount",) == provider.requests()[0].editable


def test_an_edit_reaches_the_tool_as_its_annotation_says(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """Edited "12.50" and "2026-01-02" reach the tool as Decimal and date, via its schema."""
    ran: list[Any] = []

    def refund_later(payment_id: str, amount: Decimal, on: dt.date) -> str:
        """Refund on a given day."""
        ran.append((payment_id, amount, on))
        return "scheduled"

    provider.policy = approve_edited(amount="12.50", on="2026-01-02")
    script = Script("refund_later", {"payment_id": "p_1", "amount": "49.00", "on": "2026-01-01"})
    toolset = guarded(
        FunctionToolset([refund_later]), guard, tools=["refund_later"], editable=["amount", "on"]
    )
    _run(toolset, script)
    assert [("p_1", Decimal("12.50"), dt.date(2026, 1, 2))] == ran
    assert {"payment_id": "p_1", "amount": "49.00", "on": "2026-01-01"} == (
        provider.requests()[0].arguments
    )


def test_an_edit_the_schema_refuses_does_not_run(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds, events: list[Any]
) -> None:
    """An edit the tool's own validator refuses: NotRun, nothing ran, the model got why."""
    provider.policy = approve_edited(amount="a lot")
    script = Script("issue_refund", CALL)
    toolset = guarded(
        _toolset(refunds),
        guard,
        tools=["issue_refund"],
        editable=["amount"],
        on_event=events.append,
    )
    _run(toolset, script)
    [not_run] = [event.not_run for event in events if isinstance(event, ag.CallNotRun)]
    assert [] == refunds.runs
    assert [str(not_run)] == script.seen
    assert ag.Reason.NOT_OBTAINED == not_run.reason
    assert "amount: int_parsing" in not_run.message
    assert "a lot" not in not_run.message


def _denied(provider: LocalProvider) -> None:
    provider.policy = deny_after(0.05, "refunds over 40 GBP need a manager")


def _expired(provider: LocalProvider) -> None:
    provider.policy = approve_expired


def _undecided(provider: LocalProvider) -> None:
    provider.policy = None


def _cancelled(provider: LocalProvider) -> None:
    provider.policy = cancel_at_provider


NOT_RUN = {
    "denied": (_denied, ag.Reason.DENIED),
    "expired": (_expired, ag.Reason.APPROVAL_EXPIRED),
    "no decision": (_undecided, ag.Reason.NOT_OBTAINED),
    "cancelled at the provider": (_cancelled, ag.Reason.CANCELLED),
}


@pytest.mark.parametrize(("arrange", "reason"), NOT_RUN.values(), ids=NOT_RUN.keys())
def test_a_call_that_did_not_run_gives_the_model_the_sentence(
    provider: LocalProvider,
    short_guard: ag.Guard,
    refunds: Refunds,
    events: list[Any],
    arrange: Any,
    reason: ag.Reason,
) -> None:
    """Denial, expiry, no decision, cancellation: the tool did not run; the model read why."""
    arrange(provider)
    script = Script("issue_refund", CALL)
    toolset = guarded(
        _toolset(refunds), short_guard, tools=["issue_refund"], on_event=events.append
    )
    _run(toolset, script)
    [not_run] = [event.not_run for event in events if isinstance(event, ag.CallNotRun)]
    assert reason == not_run.reason
    assert [] == refunds.runs
    assert [str(not_run)] == script.seen


def test_as_model_retry_sends_the_sentence_as_a_retry_prompt(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds
) -> None:
    """on_not_run=as_model_retry: the model gets a retry prompt holding the NotRun's sentence."""
    provider.policy = deny_after(0.05, "not today")
    script = Script("issue_refund", CALL)
    toolset = guarded(_toolset(refunds), guard, tools=["issue_refund"], on_not_run=as_model_retry)
    _run(toolset, script)
    assert [] == refunds.runs
    [retry] = script.retries
    assert "A person denied this call to issue_refund: not today." in str(retry)


def test_as_model_retry_raises_model_retry() -> None:
    """as_model_retry raises Pydantic AI's ModelRetry with str(not_run)."""
    not_run = ag.NotRun(reason=ag.Reason.DENIED, message="No.", tool="t", advice="Stop.")
    with pytest.raises(ModelRetry) as raised:
        as_model_retry(not_run)
    assert "No. Stop." == raised.value.message


def test_a_tool_not_listed_runs_without_a_request(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds
) -> None:
    """Only the listed tools wait: lookup_order runs at once, nothing is sent."""
    script = Script("lookup_order", {"order_id": "o_9"})
    _run(guarded(_toolset(refunds), guard, tools=["issue_refund"]), script)
    assert [{"lookup": "o_9"}] == refunds.runs
    assert [] == provider.requests()


def test_redacted_arguments_reach_the_tool_but_not_the_reviewer(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds
) -> None:
    """redact=("payment_id",): the reviewer sees a marker; the tool gets the real value."""
    provider.policy = approve_after(0.05)
    script = Script("issue_refund", CALL)
    _run(guarded(_toolset(refunds), guard, tools=["issue_refund"], redact=["payment_id"]), script)
    assert [CALL] == refunds.runs
    sent = provider.requests()[0].arguments
    assert "p_1" not in str(sent)
    assert 4900 == sent["amount"]


def test_cancelling_the_run_withdraws_the_request_and_runs_nothing(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds
) -> None:
    """An asyncio task cancelled while it waits: the request is withdrawn, the tool never runs."""
    script = Script("issue_refund", CALL)
    agent = Agent(
        script.model(), toolsets=[guarded(_toolset(refunds), guard, tools=["issue_refund"])]
    )

    async def main() -> str:
        task = asyncio.create_task(agent.run("refund"))
        request = await asyncio.to_thread(provider.next_request)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return request.id

    request_id = asyncio.run(main())
    assert "cancelled" == wait_for_status(provider, request_id, "cancelled")
    assert [] == refunds.runs
    assert [] == script.seen


@pytest.mark.parametrize(
    ("tools", "options", "message"),
    [
        (["issue_refnd"], {}, "does not offer"),
        ("issue_refund", {}, "not one string"),
        ([], {}, "names no tool"),
        (["issue_refund"], {"timeout": "forever"}, "malformed duration"),
        (["issue_refund"], {"editable": ["amont"]}, "not an argument"),
        (["issue_refund"], {"redact": ["amount"], "editable": ["amount"]}, "both redacted"),
        ({"issue_refund": "yes"}, {}, "must be True, False or a dict"),
    ],
)
def test_a_bad_option_raises_when_the_toolset_is_made(
    guard: ag.Guard, refunds: Refunds, tools: Any, options: dict[str, Any], message: str
) -> None:
    """A misspelt tool, a bad option or an argument the schema lacks: ConfigurationError now."""
    with pytest.raises(ag.ConfigurationError, match=message):
        guarded(_toolset(refunds), guard, tools=tools, **options)


def test_an_unknown_option_is_a_type_error(guard: ag.Guard, refunds: Refunds) -> None:
    """An option requires_approval does not have raises TypeError, as an unexpected keyword."""
    with pytest.raises(TypeError, match="timeut"):
        guarded(_toolset(refunds), guard, tools=["issue_refund"], timeut="1m")
