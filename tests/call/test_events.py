"""Events (issue 11): what the harness is told as a call goes, and that no callback can
change the outcome or the execution record.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.exact_json import canonical_json
from approval_guard.testing import LocalProvider, approve_after, deny_after
from tests.support.guards import make_guard
from tests.support.tools import MODES, define, refund, run


@pytest.mark.parametrize("mode", MODES)
def test_events_tell_the_harness_what_is_happening(provider: LocalProvider, mode: str) -> None:
    guard_events: list[Any] = []
    tool_events: list[Any] = []
    guard = make_guard(provider, on_event=guard_events.append, poll_wait="1s")
    tool = define(guard, mode, refund([]), on_event=tool_events.append)
    provider.policy = approve_after(1.6)
    assert {"refunded": 1, "currency": "GBP"} == run(tool, "pay", 1)
    assert guard_events == tool_events
    kinds = [type(e) for e in guard_events]
    assert ag.RequestCreated is kinds[0]
    assert ag.StillWaiting in kinds
    assert [ag.Decided, ag.ToolStarted, ag.ToolFinished] == kinds[-3:]
    created = guard_events[0]
    (request,) = provider.requests()
    assert request.id == created.request_id and request.deadline_at == created.deadline_at
    waiting = [e for e in guard_events if isinstance(e, ag.StillWaiting)]
    assert all(0 < e.seconds_left <= 120 for e in waiting)
    for event in guard_events:
        with pytest.raises(AttributeError):
            event.tool = "x"  # frozen


@pytest.mark.parametrize("mode", MODES)
def test_a_call_that_does_not_run_ends_with_call_not_run(
    provider: LocalProvider, mode: str
) -> None:
    events: list[Any] = []
    guard = make_guard(provider, on_event=events.append)
    provider.policy = deny_after(0.05, "no")
    out = run(define(guard, mode, refund([])), "pay", 1)
    assert isinstance(events[-1], ag.CallNotRun) and out == events[-1].not_run
    (decided,) = [e for e in events if isinstance(e, ag.Decided)]
    assert "denied" == decided.status and "no" == decided.note


@pytest.mark.parametrize("mode", MODES)
def test_a_callback_that_raises_never_changes_the_outcome(
    provider: LocalProvider, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[Any] = []

    def bad(event: Any) -> None:
        calls.append(event)
        raise RuntimeError("callback broke")

    guard = make_guard(provider, on_event=bad)
    provider.policy = approve_after(0.05)
    with caplog.at_level(logging.WARNING, "approval_guard"):
        assert {"refunded": 1, "currency": "GBP"} == run(define(guard, mode, refund([])), "p", 1)
    assert len(calls) >= 3
    assert 1 == sum("on_event callback raised" in r.message for r in caplog.records)


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
@pytest.mark.parametrize("mode", MODES)
def test_a_callback_that_changes_an_event_cannot_change_the_record(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    """Events hold copies: a callback scrubbing ArgumentsEdited leaves the record's digest true."""
    from tests.support.tools import edit_to

    def scrub(event: Any) -> None:
        if isinstance(event, ag.ArgumentsEdited):
            event.after["amount"] = 1
            event.before.clear()

    ran: list[Any] = []
    provider.policy = edit_to(amount=2500)
    tool = define(guard, mode, refund(ran), editable=("amount",), on_event=scrub)
    assert {"refunded": 2500, "currency": "GBP"} == run(tool, "pay_1", 4900)
    (request,) = provider.requests()
    row = guard.ledger.get(request.id)
    assert row is not None
    ran_json = {"payment_id": "pay_1", "amount": 2500, "currency": "GBP"}
    assert hashlib.sha256(canonical_json(ran_json).encode()).hexdigest() == row.arguments_digest
