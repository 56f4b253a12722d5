"""The rules against a provider that is hostile, slow, stale or simply unlucky."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import responses

import approval_guard as ag
from approval_guard._call.backoff import RetryPolicy
from approval_guard._codec.clock import ClockSample, plausibly_expired, still_valid
from approval_guard._codec.wire import format_http_date
from approval_guard._transport.answer import Answer
from approval_guard._transport.exchange import ExchangeSpec
from approval_guard.testing import LocalProvider, approve_after
from tests.support.api import REFUND, Api
from tests.support.fakes import BASE, SECRET, FakeProvider, ManualClock, make_tool, status_fault
from tests.support.guards import make_guard, refund_tool

ARGS = {"payment_id": "p", "amount": 1, "currency": "GBP"}
T0 = datetime(2026, 9, 16, 12, 0, 0, tzinfo=timezone.utc)


def unit_guard_for(clock: ManualClock, **options: Any) -> ag.Guard:
    settings: dict[str, Any] = {"base_url": BASE, "credential": SECRET, "clock": clock}
    settings.update(options)
    return ag.Guard(**settings)


# -- 5: a harness retry with less time left -------------------------------------------


class ReusedKeyProvider(FakeProvider):
    """A fake provider whose 422 for a reused key carries the original request (API 1.1)."""

    def __init__(self, clock: ManualClock, *, original: dict[str, Any] | None) -> None:
        super().__init__(clock)
        self.original = original

    def on_create(self, request: Any) -> Any:
        key = request.headers.get("Idempotency-Key")
        if key == "tc_retry" and self.original is not None and "tc_retry" not in self.keys:
            # The first attempt (another process, more time left) made this request.
            original = dict(self.original)
            self.requests[original["id"]] = original
            self.created_at_mono[original["id"]] = self.clock.monotonic()
            self.keys["tc_retry"] = (original["id"], b"the first attempt's body")
        answer = super().on_create(request)
        if answer[0] == 422 and self.original is not None:
            body = json.loads(answer[2])
            body["request"] = self.requests[self.keys["tc_retry"][0]]
            return 422, answer[1], json.dumps(body)
        return answer


@pytest.fixture
def reused(clock: ManualClock, request: pytest.FixtureRequest) -> Iterator[ReusedKeyProvider]:
    provider = ReusedKeyProvider(clock, original=request.param)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        provider.install(rsps)
        yield provider


def _original(**changes: Any) -> dict[str, Any]:
    out = {
        "id": "req_first",
        "tool": "issue_refund",
        "arguments": dict(ARGS),
        "timeout": "30m",
        "status": "approved",
        "created_at": "2026-09-16T11:59:00Z",
        "deadline_at": "2026-09-16T12:29:00Z",
        "decision": {
            "status": "approved",
            "note": "fine",
            "decided_at": "2026-09-16T11:59:30Z",
            "expires_at": "2026-09-16T12:04:30Z",
        },
    }
    out.update(changes)
    return out


@pytest.mark.parametrize("reused", [_original()], indirect=True)
def test_reused_key_adopts_the_original_request_that_asks_the_same(
    reused: ReusedKeyProvider, clock: ManualClock
) -> None:
    """A 422 carrying the original request with the same tool and arguments is that call."""
    ran: list[Any] = []
    with ag.harness_call(idempotency_key="tc_retry", limit="10m"):
        out = make_tool(unit_guard_for(clock), ran)("p", 1)
    assert {"refunded": 1} == out
    assert [("p", 1, "GBP")] == ran
    assert 1 == len(reused.creates)


@pytest.mark.parametrize(
    ("reused", "words"),
    [
        (_original(arguments={**ARGS, "amount": 99999}), "different tool or different arguments"),
        (_original(tool="delete_account"), "different tool or different arguments"),
        (_original(requested_by="mallory"), "another requested_by"),
        (None, "did not include"),
        (_original(status=17), "did not describe usably"),
    ],
    indirect=["reused"],
)
def test_reused_key_for_another_call_is_not_obtained(
    reused: ReusedKeyProvider, clock: ManualClock, words: str
) -> None:
    """A 422 naming other arguments, another tool, or nothing: NOT_OBTAINED, said honestly."""
    if reused.original is None:
        reused.keys["tc_retry"] = ("req_x", b"another body")
    ran: list[Any] = []
    with ag.harness_call(idempotency_key="tc_retry", limit="10m"):
        out = make_tool(unit_guard_for(clock), ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert words in out.message and "422" in out.message
    assert out.request_id is None
    assert [] == reused.cancels  # another call's request is not ours to withdraw
    assert [] == ran


def test_harness_retry_with_less_time_left_uses_the_first_approval(
    provider: LocalProvider,
) -> None:
    """Same key, less time left (so another timeout): the approval of the first create is used."""
    api = Api(provider.url, provider.credential)
    first = api.new(key="tc_less_time", arguments=REFUND, timeout="30m")
    provider.approve(first["id"], note="fine")
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran)
    with ag.harness_call(idempotency_key="tc_less_time", limit="1m"):
        out = tool("payment_123", 4900)
    assert {"refund_id": "re_1", "amount": 4900} == out
    assert [("payment_123", 4900, "GBP")] == ran
    assert 1 == len(provider.requests())


# -- 6: a stale Date ------------------------------------------------------------------


@pytest.mark.parametrize("lag", [0.0, 5.0, 120.0, 86400.0])
def test_upper_bound_is_never_below_a_provider_timestamp(lag: float) -> None:
    """However far the Date lags decided_at, the bound is decided_at plus the time since sent."""
    decided = T0 + timedelta(seconds=30)
    sample = ClockSample(sent=10.0, received=10.2, date=decided - timedelta(seconds=lag))
    upper = sample.knowing(T0, decided).provider_now_upper(15.0)
    assert upper is not None and decided + timedelta(seconds=5.0) <= upper


class LaggingDateProvider(FakeProvider):
    """Every Date header is two minutes behind the provider's own timestamps (a cache)."""

    def headers(self) -> dict[str, str]:
        out = super().headers()
        out["Date"] = format_http_date(self.pnow() - timedelta(minutes=2))
        return out


def test_a_lagging_date_does_not_stretch_an_approval(clock: ManualClock) -> None:
    """An approval for 60 s, 70 s spent claiming, and a Date 2 min behind: it does not run."""

    class SlowLedger(ag.MemoryLedger):
        def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
            clock.advance(70)
            return super().claim(request_id, tool=tool, worker=worker)

    provider = LaggingDateProvider(clock)
    provider.script[0] = ("approve", 60)
    ran: list[Any] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        provider.install(rsps)
        out = make_tool(unit_guard_for(clock, ledger=SlowLedger()), ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.APPROVAL_EXPIRED == out.reason
    assert [] == ran


@pytest.mark.parametrize(
    "date",
    [
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
        datetime.min.replace(tzinfo=timezone.utc),
    ],
)
def test_estimates_at_the_ends_of_the_calendar_fail_closed(date: datetime) -> None:
    """A Date at either end of the calendar: no estimate, no exception, not valid."""
    sample = ClockSample(sent=0.0, received=0.0, date=date).knowing(T0)
    expires = datetime(9999, 12, 31, tzinfo=timezone.utc)
    assert still_valid(expires, sample, 1e12)[0] is False
    assert plausibly_expired(expires, sample, 1e12) in (True, False)
    sample.to_local(expires)


# -- 7: a short approval late in a long poll -----------------------------------------


def test_short_approval_late_in_a_long_poll_runs(clock: ManualClock, fake: FakeProvider) -> None:
    """Valid for 10 s, arriving 12 s into a 20 s poll: a wait=0 re-read confirms it; it runs."""
    fake.script[12] = ("approve", 10)
    ran: list[Any] = []
    out = make_tool(unit_guard_for(clock, poll_wait="20s"), ran)("p", 1)
    assert {"refunded": 1} == out
    assert ["wait=20s", "wait=0s"] == [url.rsplit("?", 1)[1] for _, url, _, _ in fake.polls]


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


def test_short_approval_late_in_a_real_long_poll_runs() -> None:
    """Over HTTP, provider clock 7 min ahead: valid for 2 s, arriving 2 s into the poll, runs."""
    with LocalProvider(
        clock_offset=timedelta(minutes=7), policy=approve_after(2.0, valid_for=2.0)
    ) as provider:
        ran: list[Any] = []
        out = refund_tool(make_guard(provider, poll_wait="5s"), ran)("p", 1)
    assert {"refund_id": "re_1", "amount": 1} == out
    assert 1 == len(ran)


# -- 8: floors under every pause --------------------------------------------------------


def test_every_pause_has_a_floor() -> None:
    """Full jitter may draw 0 and Retry-After may say 0: the pause is never under the floor."""
    policy = RetryPolicy()
    delays = policy.delays()
    assert all(policy.floor <= next(delays) <= policy.cap for _ in range(200))
    assert policy.floor == policy.pause(0.0, 0.0)
    assert policy.floor == policy.pause(0.0, None)
    assert 7.0 == policy.pause(0.0, 7.0)


def test_retry_after_zero_is_paused_at_the_floor(clock: ManualClock, fake: FakeProvider) -> None:
    """Creates answered 503 Retry-After: 0 are retried after the floor, not at once."""
    fake.faults = [status_fault(503, "unavailable", "0")] * 5
    fake.script[0] = ("approve", 300)
    make_tool(unit_guard_for(clock), [])("p", 1)
    assert 5 == len(clock.sleeps)
    assert all(s >= RetryPolicy().floor for s in clock.sleeps)


@pytest.mark.parametrize("on", ["create", "poll"])
def test_retry_after_zero_forever_is_not_a_storm(provider: LocalProvider, on: str) -> None:
    """A provider answering 503 Retry-After: 0 forever gets a bounded number of exchanges."""
    provider.faults.add("status", on=on, status=503, retry_after=0, times=100_000)
    guard = make_guard(
        provider, harness_limit=1.5, return_margin=0.25, deadline_margin=0.25
    )
    out = refund_tool(guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    exchanges = getattr(provider.stats, f"{on}s")
    assert exchanges <= 1.25 / RetryPolicy().floor + 5


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


# -- 9: abandoning during a slow create -------------------------------------------------

CREATE_DELAY = 2.5


def _no_request_left_pending(provider: LocalProvider) -> None:
    end = time.monotonic() + CREATE_DELAY + 3
    while time.monotonic() < end:
        requests = provider.requests()
        if requests and all(r.status != "pending" for r in requests):
            return
        time.sleep(0.05)
    raise AssertionError(f"left behind: {[(r.id, r.status) for r in provider.requests()]}")


def test_abandoning_during_a_slow_create_returns_promptly(
    provider: LocalProvider,
) -> None:
    """Abandoned 0.3 s into a create that takes 2.5 s: CANCELLED at once, nothing left pending."""
    provider.faults.add("delay", on="create", delay=CREATE_DELAY)
    gone = threading.Event()
    threading.Timer(0.3, gone.set).start()
    ran: list[Any] = []
    started = time.monotonic()
    with ag.harness_call(abandon=gone):
        out = refund_tool(make_guard(provider), ran)("p", 1)
    assert time.monotonic() - started < CREATE_DELAY - 0.3
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert [] == ran
    _no_request_left_pending(provider)


def test_cancelling_a_task_during_a_slow_create_returns_promptly(
    provider: LocalProvider,
) -> None:
    """A task cancelled 0.3 s into a 2.5 s create: CancelledError at once, nothing left pending."""
    provider.faults.add("delay", on="create", delay=CREATE_DELAY)
    guard = make_guard(provider)

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return payment_id

    async def main() -> float:
        task = asyncio.create_task(refund("p"))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    assert asyncio.run(main()) < CREATE_DELAY - 0.5
    _no_request_left_pending(provider)


# -- 2: nothing a provider sends may make the call raise -------------------------------


def _kind(spec: ExchangeSpec) -> str:
    if spec.method == "GET":
        return "read"
    return "cancel" if spec.path.endswith("/cancel") else "create"


class RaisingClient:
    """A transport whose ``method`` exchanges are done for real, then raise ``error``."""

    def __init__(self, real: Any, method: str, error: Exception, times: int) -> None:
        self.real, self.method, self.error, self.times = real, method, error, times

    def _raise(self, spec: ExchangeSpec) -> None:
        if _kind(spec) == self.method and self.times > 0:
            self.times -= 1
            raise self.error

    def perform(self, spec: ExchangeSpec) -> Answer:
        answer: Answer = self.real.perform(spec)
        self._raise(spec)
        return answer

    def close(self) -> None:
        self.real.close()

    async def aperform(self, spec: ExchangeSpec) -> Answer:
        answer: Answer = await self.real(spec)
        self._raise(spec)
        return answer


def raising(guard: ag.Guard, method: str, error: Exception, times: int) -> None:
    """Make ``guard``'s exchanges of kind ``method`` raise ``error`` (sync and async tools)."""
    guard._client = RaisingClient(guard._client, method, error, times)  # type: ignore[assignment]
    guard._aperform = RaisingClient(guard._async_transport(), method, error, times).aperform


ERRORS = [ValueError("bad timestamp"), OverflowError("date value out of range")]


@pytest.mark.parametrize("error", ERRORS, ids=["ValueError", "OverflowError"])
@pytest.mark.parametrize("method", ["create", "read"])
def test_an_exchange_that_always_raises_is_not_obtained(
    clock: ManualClock, fake: FakeProvider, method: str, error: Exception
) -> None:
    """A create or poll that raises every time: NOT_OBTAINED, the request withdrawn if known."""
    guard = unit_guard_for(clock)
    fake.attach_async(guard)
    raising(guard, method, error, times=10**9)
    # 20 s of refused creates first, so the harness limit comes before the deadline.
    fake.faults = [status_fault(503, "unavailable", "10")] * 2
    ran: list[Any] = []
    with ag.harness_call(limit="1m"):
        out = make_tool(guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran
    if method == "read":
        assert ["cancelled"] == [r["status"] for r in fake.requests.values()]


@pytest.mark.parametrize("error", ERRORS, ids=["ValueError", "OverflowError"])
@pytest.mark.parametrize("method", ["create", "read"])
def test_an_exchange_that_raises_is_retried_async(
    provider: LocalProvider, method: str, error: Exception
) -> None:
    """Async: a create or poll that raises once is a failed exchange, retried, never raised."""
    provider.policy = approve_after(0.2)
    guard = make_guard(provider)
    raising(guard, method, error, times=1)

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return payment_id

    assert "p" == asyncio.run(refund("p"))
    assert 1 == len(provider.requests())


def test_an_answer_too_deep_to_handle_is_not_obtained(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """Arguments nested past the recursion limit in an answer: NOT_OBTAINED, no exception."""
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    fake.script[0] = ("raw", {"arguments": {"payment_id": deep}})
    with ag.harness_call(limit="1m"):
        out = make_tool(unit_guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
