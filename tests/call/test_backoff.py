"""Pauses between exchanges: Retry-After read strictly, a floor under every pause, no storm
of exchanges, and a call that ends rather than sleep past its time.
"""

from __future__ import annotations

import json
import random
import time
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._call.backoff import MAX_RETRY_AFTER, RetryPolicy, parse_retry_after
from approval_guard._codec.wire import format_http_date
from approval_guard.testing import LocalProvider
from tests.support.fakes import FakeProvider, ManualClock, make_tool, status_fault, unit_guard_for
from tests.support.guards import make_guard, refund_tool
from tests.support.moments import NEAR_DATES, NOW


# From the hardening pass, item 8: floors under every pause.
def test_every_pause_has_a_floor() -> None:
    """Full jitter may draw 0 and Retry-After may say 0: the pause is never under the floor."""
    policy = RetryPolicy()
    delays = policy.delays()
    assert all(policy.floor <= next(delays) <= policy.cap for _ in range(200))
    assert policy.floor == policy.pause(0.0, 0.0)
    assert policy.floor == policy.pause(0.0, None)
    assert 7.0 == policy.pause(0.0, 7.0)


# From the hardening pass, item 8: floors under every pause.
def test_retry_after_zero_is_paused_at_the_floor(clock: ManualClock, fake: FakeProvider) -> None:
    """Creates answered 503 Retry-After: 0 are retried after the floor, not at once."""
    fake.faults = [status_fault(503, "unavailable", "0")] * 5
    fake.script[0] = ("approve", 300)
    make_tool(unit_guard_for(clock), [])("p", 1)
    assert 5 == len(clock.sleeps)
    assert all(s >= RetryPolicy().floor for s in clock.sleeps)


# From the hardening pass, item 8: floors under every pause.
@pytest.mark.parametrize("on", ["create", "poll"])
def test_retry_after_zero_forever_is_not_a_storm(provider: LocalProvider, on: str) -> None:
    """A provider answering 503 Retry-After: 0 forever gets a bounded number of exchanges."""
    provider.faults.add("status", on=on, status=503, retry_after=0, times=100_000)
    guard = make_guard(provider, harness_limit=1.5, return_margin=0.25, deadline_margin=0.25)
    out = refund_tool(guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    exchanges = getattr(provider.stats, f"{on}s")
    assert exchanges <= 1.25 / RetryPolicy().floor + 5


# From the hardening pass, item 8: floors under every pause.
@pytest.mark.parametrize("on", ["create", "poll"])
def test_retry_after_beyond_the_time_left_is_said(
    clock: ManualClock, fake: FakeProvider, on: str
) -> None:
    """Retry-After: 120 with 30 s left ends the call, saying the provider asked for later."""
    fault = status_fault(503, "unavailable", "120")
    fake.faults = [fault] if on == "create" else [None, fault]
    with ag.harness_call(limit="35s"):
        out = make_tool(unit_guard_for(clock), [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "asked to be called again in 120 s, more than the" in out.message
    assert "denied" not in out.message.replace("nobody denied", "")


# From the hardening pass, item 8: floors under every pause.
def test_a_provider_that_ignores_wait_is_not_polled_in_a_storm(
    clock: ManualClock, fake: FakeProvider
) -> None:
    """Long polls answered 'pending' at once are backed off, not repeated at once."""

    def at_once() -> Any:
        (req,) = fake.requests.values()
        return 200, fake.headers(), json.dumps(req)

    fake.faults = [None] + [at_once] * 5000
    out = make_tool(unit_guard_for(clock), [], timeout="2m")("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert len(fake.polls) <= 200


@given(st.one_of(st.text(), NEAR_DATES, st.from_regex(r"[0-9]{1,40}", fullmatch=True)))
def test_parse_retry_after_never_raises(value: str) -> None:
    """Any header text gives None or a delay between 0 and a day."""
    delay = parse_retry_after(value, NOW, NOW)
    assert delay is None or 0.0 <= delay <= MAX_RETRY_AFTER


@pytest.mark.parametrize(
    ("expected", "value"),
    [
        (0.0, "0"),
        (120.0, "120"),
        (7.0, " 7 "),
        (5.0, "00000000000000000005"),
        (MAX_RETRY_AFTER, "86401"),
        (MAX_RETRY_AFTER, "9" * 40),
        (30.0, format_http_date(NOW + timedelta(seconds=30))),
        (0.0, format_http_date(NOW - timedelta(seconds=30))),
        (None, "\u00b2"),
        (None, "\u00b9\u00b2\u00b3"),
        (None, "\u0661\u0662"),
        (None, "1.5"),
        (None, "-1"),
        (None, "+5"),
        (None, "1e3"),
        (None, "Fri, 31 Dec 9999 23:59:59 -2359"),
        (None, ""),
        (None, None),
    ],
)
def test_parse_retry_after_reads_only_delay_seconds_or_an_http_date(
    expected: float | None, value: str | None
) -> None:
    """ASCII delay-seconds (capped at a day) or an HTTP-date; anything else is absent."""
    assert expected == parse_retry_after(value, NOW, NOW)


# From the hardening pass, item 2: headers are parsed strictly and never raise.
@pytest.mark.parametrize("on", ["create", "poll"])
@pytest.mark.parametrize(
    "retry_after", ["\u00b2", "\u00b9\u00b2\u00b3", "Fri, 31 Dec 9999 23:59:59 -2359"]
)
def test_a_retry_after_that_is_not_rfc_9110_is_ignored(
    approving: LocalProvider, on: str, retry_after: str
) -> None:
    """A Unicode-digit or calendar-edge Retry-After is treated as absent: backoff, retry, run."""
    approving.faults.add("status", on=on, status=503, retry_after=retry_after)
    ran: list[Any] = []
    tool = refund_tool(make_guard(approving), ran)
    assert {"refund_id": "re_1", "amount": 1} == tool("p_1", 1)
    assert [("p_1", 1, "GBP")] == ran


def test_retry_after_longer_than_the_wait_ends_it_without_spinning(
    provider: LocalProvider,
) -> None:
    """A poll answered 429 Retry-After: 100 gives up at once instead of polling in a loop."""
    provider.faults.add("status", on="poll", status=429, retry_after=100, times=10_000)
    guard = make_guard(provider, harness_limit="8s", poll_wait="1s")
    started = time.monotonic()
    out = refund_tool(guard, [])("p", 1)
    assert time.monotonic() - started < 8
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert provider.stats.polls <= 2
    assert "cancelled" == provider.requests()[0].status


def test_backoff_pauses_leave_the_random_modules_state_alone() -> None:
    """Jitter comes from the package's own generator: a caller's seeded random is not moved."""
    state = random.getstate()
    delays = RetryPolicy().delays()
    pauses = [next(delays) for _ in range(5)]
    assert state == random.getstate()
    assert all(0.1 <= pause <= 5.0 for pause in pauses)
