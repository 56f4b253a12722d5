"""When an approval may still run: a stale or lagging Date, an approval arriving late in a
long poll, a re-read that fails, callbacks that take their time.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests
import responses

import approval_guard as ag
from approval_guard._codec.serialize import dumps
from approval_guard._codec.wire import format_http_date
from approval_guard.testing import LocalProvider, approve_after
from tests.support.fakes import (
    FakeProvider,
    ManualClock,
    ShiftedSystemClock,
    make_tool,
    status_fault,
    unit_guard_for,
)
from tests.support.guards import make_guard, refund_tool
from tests.support.tools import MODES, define, refund, run

ARGS = {"payment_id": "p", "amount": 1, "currency": "GBP"}


def _create_raw(p: LocalProvider, key: str, arguments: dict[str, Any], timeout: str) -> str:
    """Create a request as an earlier attempt of the call would have (same key, same bytes)."""
    body = dumps({"tool": "issue_refund", "arguments": arguments, "timeout": timeout})
    answer = requests.post(
        p.url + "/v1/requests",
        data=body,
        headers={
            "Authorization": f"Bearer {p.credential}",
            "Idempotency-Key": key,
            "Content-Type": "application/json",
        },
        timeout=5,
    )
    assert answer.status_code == 201, answer.text
    request_id: str = answer.json()["id"]
    return request_id


# Found in the adversarial review of the guard side (what it does with answers).
@pytest.mark.parametrize(
    ("lagging", "expected"),
    [("create", ag.Reason.APPROVAL_EXPIRED), ("any", ag.Reason.NOT_OBTAINED)],
)
def test_a_date_behind_an_old_decision_does_not_keep_an_expired_approval_alive(
    provider: LocalProvider, lagging: str, expected: ag.Reason
) -> None:
    """An approval that expired a minute ago, read through a Date lagging behind it: no run."""
    p = provider
    p.clock_offset = timedelta(seconds=-120)
    request_id = _create_raw(p, "tc_old", ARGS, "1m")
    p.approve(request_id, valid_for="1m")  # decided 2 min ago, expired 1 min ago
    p.clock_offset = timedelta(0)
    stale = datetime.now(timezone.utc) - timedelta(minutes=5)  # a cache's Date
    p.faults.add("headers", on=lagging, times=10, headers={"Date": format_http_date(stale)})
    ran: list[Any] = []
    with ag.harness_call(idempotency_key="tc_old"):
        out = refund_tool(make_guard(p), ran, timeout="1m")("p", 1)
    assert [] == ran
    assert isinstance(out, ag.NotRun) and expected == out.reason, out.message


class LaggingDateProvider(FakeProvider):
    """Every Date header is two minutes behind the provider's own timestamps (a cache)."""

    def headers(self) -> dict[str, str]:
        out = super().headers()
        out["Date"] = format_http_date(self.pnow() - timedelta(minutes=2))
        return out


# From the hardening pass, item 6: a stale Date.
def test_a_lagging_date_does_not_stretch_an_approval(clock: ManualClock) -> None:
    """An approval for 60 s, 70 s spent claiming, and a Date 2 min behind: it does not run."""

    class SlowLedger(ag.MemoryLedger):
        def claim(
            self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
        ) -> bool:
            clock.advance(70)
            return super().claim(
                request_id, tool=tool, worker=worker, arguments_digest=arguments_digest
            )

    provider = LaggingDateProvider(clock)
    provider.script[0] = ("approve", 60)
    ran: list[Any] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        provider.install(rsps)
        out = make_tool(unit_guard_for(clock, ledger=SlowLedger()), ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.APPROVAL_EXPIRED == out.reason
    assert [] == ran


# From the hardening pass, item 7: a short approval late in a long poll.
def test_short_approval_late_in_a_long_poll_runs(clock: ManualClock, fake: FakeProvider) -> None:
    """Valid for 10 s, arriving 12 s into a 20 s poll: a wait=0 re-read confirms it; it runs."""
    fake.script[12] = ("approve", 10)
    ran: list[Any] = []
    out = make_tool(unit_guard_for(clock, poll_wait="20s"), ran)("p", 1)
    assert {"refunded": 1} == out
    assert ["wait=20s", "wait=0s"] == [url.rsplit("?", 1)[1] for _, url, _, _ in fake.polls]


# From the hardening pass, item 7: a short approval late in a long poll.
def test_unconfirmable_approval_is_not_called_expired(
    clock: ManualClock, fake: FakeProvider
) -> None:
    """If the re-read fails, the approval is refused without claiming it expired."""
    fake.script[12] = ("approve", 10)
    fake.faults = [None, None, status_fault(503)]  # create, long poll; the re-read fails
    ran: list[Any] = []
    out = make_tool(unit_guard_for(clock, poll_wait="20s"), ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "could not be confirmed" in out.message and "expired" not in out.message
    assert [] == ran


# From the hardening pass, item 7: a short approval late in a long poll.
@pytest.mark.parametrize(
    ("valid_for", "reason"),
    [(-5.0, ag.Reason.APPROVAL_EXPIRED), (0.9, ag.Reason.NOT_OBTAINED)],
)
def test_expired_is_said_only_of_an_approval_past_its_end(
    fake: FakeProvider, unit_guard: ag.Guard, valid_for: float, reason: ag.Reason
) -> None:
    """Past its end: APPROVAL_EXPIRED; inside the Date's resolution: refused, not 'expired'."""
    fake.script[0] = ("approve", valid_for)
    ran: list[Any] = []
    out = make_tool(unit_guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun) and reason == out.reason
    assert (reason == ag.Reason.APPROVAL_EXPIRED) == ("expired" in out.message)
    assert [] == ran


# From the hardening pass, item 7: a short approval late in a long poll.
def test_short_approval_late_in_a_real_long_poll_runs() -> None:
    """Over HTTP, provider clock 7 min ahead: valid for 2 s, arriving 2 s into the poll, runs."""
    with LocalProvider(
        clock_offset=timedelta(minutes=7), policy=approve_after(2.0, valid_for=2.0)
    ) as provider:
        ran: list[Any] = []
        out = refund_tool(make_guard(provider, poll_wait="5s"), ran)("p", 1)
    assert {"refund_id": "re_1", "amount": 1} == out
    assert 1 == len(ran)


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
@pytest.mark.parametrize("mode", MODES)
def test_a_slow_tool_started_callback_cannot_outlast_the_approval(
    provider: LocalProvider, mode: str
) -> None:
    """The approval's expiry is checked after ToolStarted's callbacks return, not before."""
    ran: list[Any] = []
    clock = ShiftedSystemClock()
    guard = make_guard(provider, clock=clock)

    def slow(event: Any) -> None:
        if isinstance(event, ag.ToolStarted):
            clock.advance(2.0)  # a slow callback, without the wall-clock wait

    def policy(provider: LocalProvider, request: Any) -> None:
        provider.approve(request.id, valid_for=2)

    provider.policy = policy
    tool = define(guard, mode, refund(ran), on_event=slow)
    try:
        out = run(tool, "pay", 1)
    finally:
        guard.close()
    assert [] == ran
    assert isinstance(out, ag.NotRun) and ag.Reason.APPROVAL_EXPIRED is out.reason
