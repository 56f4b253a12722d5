"""resolve_deferred: Pydantic AI's own deferred approvals answered from the provider."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.frameworks.pydantic_ai_support import Script
from tests.support.agents import approve_edited, approve_expired, cancel_at_provider
from tests.support.frameworks import require_framework

require_framework("pydantic_ai")

from pydantic_ai import (  # noqa: E402
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDenied,
)

import approval_guard as ag  # noqa: E402
from approval_guard.pydantic_ai import resolve_deferred  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402

CALL = {"payment_id": "p_1", "amount": 4900}


def _agent(script: Script, ran: list[Any]) -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        script.model(), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment; amount is in minor units."""
        ran.append((payment_id, amount))
        return f"refunded {amount} of {payment_id}"

    return agent


def _two_runs(guard: ag.Guard, script: Script, ran: list[Any], **options: Any) -> Any:
    """Run until the approval is deferred, resolve it at the provider, run again."""
    agent = _agent(script, ran)

    async def main() -> tuple[DeferredToolResults, Any]:
        first = await agent.run("refund payment p_1")
        assert isinstance(first.output, DeferredToolRequests)
        assert [] == ran
        results = await resolve_deferred(first.output, guard, **options)
        second = await agent.run(
            message_history=first.all_messages(), deferred_tool_results=results
        )
        return results, second.output

    return asyncio.run(main())


def test_an_approval_is_tool_approved_and_the_tool_runs_once(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """Approved as sent: ToolApproved(); the next run runs the tool once with the model's call."""
    provider.policy = approve_after(0.05)
    ran: list[Any] = []
    script = Script("issue_refund", CALL)
    results, _ = _two_runs(guard, script, ran, timeout="1m")
    assert {"call_1": ToolApproved()} == results.approvals
    assert [("p_1", 4900)] == ran
    assert ["refunded 4900 of p_1"] == script.seen
    assert CALL == provider.requests()[0].arguments


def test_an_edit_is_override_args(provider: LocalProvider, guard: ag.Guard) -> None:
    """Approved with an edit: ToolApproved(override_args=...), and the tool runs with it."""
    provider.policy = approve_edited(amount=100)
    ran: list[Any] = []
    script = Script("issue_refund", CALL)
    results, _ = _two_runs(guard, script, ran, editable=["amount"])
    assert {"call_1": ToolApproved(override_args={"payment_id": "p_1", "amount": 100})} == (
        results.approvals
    )
    assert [("p_1", 100)] == ran


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
def test_every_call_not_approved_is_tool_denied_with_the_sentence(
    provider: LocalProvider, short_guard: ag.Guard, arrange: Any, reason: ag.Reason
) -> None:
    """Denial, expiry, no decision, cancellation: ToolDenied(sentence); the model reads it."""
    arrange(provider)
    ran: list[Any] = []
    events: list[Any] = []
    script = Script("issue_refund", CALL)
    results, _ = _two_runs(short_guard, script, ran, on_event=events.append)
    [not_run] = [event.not_run for event in events if isinstance(event, ag.CallNotRun)]
    assert reason == not_run.reason
    assert {"call_1": ToolDenied(str(not_run))} == results.approvals
    assert [] == ran
    assert [str(not_run)] == script.seen


def test_tools_limits_what_is_answered(guard: ag.Guard, provider: LocalProvider) -> None:
    """A call of a tool not in tools= is left out of the results, and nothing is sent for it."""
    script = Script("issue_refund", CALL)
    agent = _agent(script, [])
    first = agent.run_sync("refund")
    assert isinstance(first.output, DeferredToolRequests)
    results = asyncio.run(resolve_deferred(first.output, guard, tools={"issue_refund": False}))
    assert {} == results.approvals
    assert [] == provider.requests()


def test_a_bad_argument_raises_before_anything_is_sent(guard: ag.Guard) -> None:
    """Not DeferredToolRequests, or a bad option: ConfigurationError (or TypeError), no request."""
    with pytest.raises(ag.ConfigurationError, match="DeferredToolRequests"):
        asyncio.run(resolve_deferred({"approvals": []}, guard))  # type: ignore[arg-type]
    with pytest.raises(ag.ConfigurationError, match="malformed duration"):
        asyncio.run(resolve_deferred(DeferredToolRequests(), guard, tools=["t"], timeout="x"))
