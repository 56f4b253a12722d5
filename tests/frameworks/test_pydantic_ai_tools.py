"""@agent.tool / @agent.tool_plain over @guard.requires_approval, in Pydantic AI's agent loop."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs
import pytest

from tests.frameworks.pydantic_ai_support import Script
from tests.support.agents import approve_edited, approve_expired, cancel_at_provider
from tests.support.frameworks import require_framework

require_framework("pydantic_ai")

from pydantic_ai import Agent, RunContext  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard.pydantic_ai import as_model_retry  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402


@attrs.frozen
class Support:
    """The agent's dependencies: who it acts for."""

    agent_name: str


CALL = {"payment_id": "p_1", "amount": "49.00"}


def _agent(guard: ag.Guard, script: Script, ran: list[Any], **options: Any) -> Agent[Support, str]:
    """An agent whose issue_refund takes the RunContext (and a Decimal the reviewer may edit)."""
    agent: Agent[Support, str] = Agent(script.model(), deps_type=Support)

    @agent.tool
    @guard.requires_approval(timeout="1m", editable=("amount",), on_not_run=str, **options)
    async def issue_refund(ctx: RunContext[Support], payment_id: str, amount: Decimal) -> str:
        """Refund part of a payment; amount in GBP."""
        ran.append((ctx.deps.agent_name, payment_id, amount))
        return f"refunded {amount} of {payment_id}"

    return agent


def _run(agent: Agent[Support, str]) -> str:
    output: str = agent.run_sync("refund", deps=Support("support-bot")).output
    return output


def test_the_run_context_is_recognised_and_never_sent(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """RunContext reaches the tool; the reviewer sees only the model's arguments."""
    provider.policy = approve_after(0.05)
    ran: list[Any] = []
    script = Script("issue_refund", CALL)
    _run(_agent(guard, script, ran))
    assert [("support-bot", "p_1", Decimal("49.00"))] == ran
    assert ["refunded 49.00 of p_1"] == script.seen
    assert {"payment_id": "p_1", "amount": "49.00"} == provider.requests()[0].arguments


def test_the_schema_the_model_sees_is_the_unguarded_one(guard: ag.Guard) -> None:
    """The guarded function's tool has the same JSON schema as the plain function's."""

    def refund(payment_id: str, amount: Decimal) -> str:
        """Refund part of a payment."""
        return ""

    plain: Agent[None, str] = Agent("test")
    plain.tool_plain(refund)
    wrapped: Agent[None, str] = Agent("test")
    wrapped.tool_plain(guard.requires_approval(timeout="1m")(refund))
    schema = plain._function_toolset.tools["refund"].function_schema.json_schema
    assert schema == wrapped._function_toolset.tools["refund"].function_schema.json_schema


def test_an_edit_reaches_the_tool_converted_to_its_annotation(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """A reviewer's "12.50" reaches the tool as Decimal("12.50"), once."""
    provider.policy = approve_edited(amount="12.50")
    ran: list[Any] = []
    script = Script("issue_refund", CALL)
    _run(_agent(guard, script, ran))
    assert [("support-bot", "p_1", Decimal("12.50"))] == ran
    assert ["refunded 12.50 of p_1"] == script.seen


def _denied(provider: LocalProvider) -> None:
    provider.policy = deny_after(0.05, "refunds over 40 GBP need a manager")


def _expired(provider: LocalProvider) -> None:
    provider.policy = approve_expired


def _cancelled(provider: LocalProvider) -> None:
    provider.policy = cancel_at_provider


def _undecided(provider: LocalProvider) -> None:
    provider.policy = None


NOT_RUN = {
    "denied": (_denied, ag.Reason.DENIED),
    "expired": (_expired, ag.Reason.APPROVAL_EXPIRED),
    "no decision": (_undecided, ag.Reason.NOT_OBTAINED),
    "cancelled at the provider": (_cancelled, ag.Reason.CANCELLED),
}


@pytest.mark.parametrize(("arrange", "reason"), NOT_RUN.values(), ids=NOT_RUN.keys())
def test_a_call_that_did_not_run_gives_the_model_the_sentence(
    provider: LocalProvider, short_guard: ag.Guard, arrange: Any, reason: ag.Reason
) -> None:
    """Denial, expiry, no decision, cancellation: the tool did not run; the model read why."""
    arrange(provider)
    ran: list[Any] = []
    events: list[Any] = []
    script = Script("issue_refund", CALL)
    _run(_agent(short_guard, script, ran, on_event=events.append))
    [not_run] = [event.not_run for event in events if isinstance(event, ag.CallNotRun)]
    assert reason == not_run.reason
    assert [] == ran
    assert [str(not_run)] == script.seen


def test_a_plain_tool_with_model_retry(provider: LocalProvider, guard: ag.Guard) -> None:
    """@agent.tool_plain with on_not_run=as_model_retry: a denial is a retry prompt."""
    provider.policy = deny_after(0.05, "no")
    ran: list[Any] = []
    script = Script("close_account", {"account_id": "a_1"})
    agent: Agent[None, str] = Agent(script.model())

    @agent.tool_plain
    @guard.requires_approval(timeout="1m", on_not_run=as_model_retry)
    def close_account(account_id: str) -> str:
        """Close an account."""
        ran.append(account_id)
        return "closed"

    agent.run_sync("close it")
    assert [] == ran
    [retry] = script.retries
    assert str(retry).startswith("A person denied this call to close_account: no.")
