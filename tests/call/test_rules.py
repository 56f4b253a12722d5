"""The call's rules on a scripted provider and a manual clock (HTTP edge through ``responses``)."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard._codec.wire import format_http_date
from approval_guard._transport.answer import MAX_ANSWER_BYTES
from tests.support.fakes import (
    BASE,
    SECRET,
    FakeProvider,
    ManualClock,
    make_tool,
    raise_fault,
    status_fault,
)


def make_guard(clock: ManualClock, **options: Any) -> ag.Guard:
    """A Guard on the fake provider and ``clock``, with ``options`` for the rest."""
    return ag.Guard(base_url=BASE, credential=SECRET, clock=clock, **options)


def test_approved_call_runs_once_with_original_objects(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """An approval lets the tool run, with the caller's own objects and the result returned."""
    fake.script[0] = ("approve", 300, "fine")
    ran: list[tuple[Any, ...]] = []
    out = make_tool(unit_guard, ran)("payment_123", 4900)
    assert {"refunded": 4900} == out
    assert [("payment_123", 4900, "GBP")] == ran
    assert [] == fake.polls  # a terminal answer to the create needs no poll


def test_create_sends_key_bearer_and_canonical_body(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """The create carries a UUID4 Idempotency-Key, the Bearer credential and the bound call."""
    fake.script[0] = ("approve", 300)
    make_tool(unit_guard, [])("payment_123", 4900)
    (_, _, headers, body) = fake.creates[0]
    assert 4 == uuid.UUID(headers["Idempotency-Key"]).version
    assert f"Bearer {SECRET}" == headers["Authorization"]
    assert {
        "tool": "issue_refund",
        "arguments": {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"},
        "timeout": "30m",
    } == json.loads(body or b"")


def test_harness_key_is_used(fake: FakeProvider, unit_guard: ag.Guard) -> None:
    """harness_call's idempotency key is the create's key."""
    fake.script[0] = ("approve", 300)
    with ag.harness_call(idempotency_key="toolcall_abc"):
        make_tool(unit_guard, [])("p", 1)
    assert "toolcall_abc" == fake.creates[0][2]["Idempotency-Key"]


def test_pending_is_polled_until_decided(fake: FakeProvider, unit_guard: ag.Guard) -> None:
    """Pending answers are polled again with wait=30s until the decision."""
    fake.script[95] = ("approve", 300)
    ran: list[Any] = []
    assert {"refunded": 1} == make_tool(unit_guard, ran)("p", 1)
    assert 4 == len(fake.polls)
    assert all(url.endswith("?wait=30s") for _, url, _, _ in fake.polls)


def says_denied(message: str) -> bool:
    """Whether ``message`` tells the model that someone denied the call."""
    return "denied" in message.replace("not denied", "")


@pytest.mark.parametrize(
    ("script", "timeout", "reason", "status", "note"),
    [
        pytest.param(
            {10: ("deny", "Not a duplicate charge.")},
            "30m",
            ag.Reason.DENIED,
            "denied",
            "Not a duplicate charge.",
            id="denied-by-a-person",
        ),
        pytest.param({}, "2m", ag.Reason.NOT_OBTAINED, "expired", None, id="expired-undecided"),
        pytest.param(
            {40: ("cancel",)},
            "30m",
            ag.Reason.CANCELLED,
            "cancelled",
            None,
            id="cancelled-at-provider",
        ),
    ],
)
def test_a_request_that_ends_unapproved_does_not_run(
    fake: FakeProvider,
    unit_guard: ag.Guard,
    script: dict[float, tuple[Any, ...]],
    timeout: str,
    reason: ag.Reason,
    status: str,
    note: str | None,
) -> None:
    """Each way a request ends unapproved has its reason, status and note; only a denial says so."""
    fake.script.update(script)
    ran: list[Any] = []
    out = make_tool(unit_guard, ran, timeout=timeout)("p", 1)
    assert isinstance(out, ag.NotRun)
    assert reason == out.reason
    assert status == out.status
    assert note == out.note
    assert (out.note or "") in out.message
    assert (ag.Reason.DENIED == reason) == says_denied(out.message)
    assert [] == ran


@pytest.mark.parametrize(
    "raw",
    [
        {"status": "approved_ish"},
        {"status": "approved"},  # no decision at all
        {
            "status": "approved",
            "decision": {"status": "denied", "note": None, "decided_at": "2026-09-16T12:00:01Z"},
        },
        {
            "status": "approved",
            "decision": {"status": "approved", "note": None, "decided_at": "2026-09-16T12:00:01Z"},
        },
        {
            "status": "approved",
            "decision": {
                "status": "approved",
                "note": None,
                "decided_at": "2026-09-16T12:00:01Z",
                "expires_at": "tomorrow",
            },
        },
        {"status": "denied"},
        {"tool": "other_tool"},
        {"arguments": {"payment_id": "p", "amount": 999999, "currency": "GBP"}},
    ],
)
def test_doubtful_answers_never_run_the_tool(
    fake: FakeProvider, unit_guard: ag.Guard, raw: dict[str, Any]
) -> None:
    """Unknown status, missing decision or expiry, mismatched echo: the tool does not run."""
    fake.script[0] = ("raw", raw)
    ran: list[Any] = []
    out = make_tool(unit_guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran


@pytest.mark.parametrize("offset", [-600.0, 0.0, 600.0])
def test_provider_clock_skew_does_not_change_the_outcome(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard, offset: float
) -> None:
    """A provider clock ten minutes ahead or behind: a valid approval still runs."""
    fake.offset = offset
    fake.script[20] = ("approve", 300)
    ran: list[Any] = []
    assert {"refunded": 1} == make_tool(unit_guard, ran)("p", 1)


@pytest.mark.parametrize("offset", [-600.0, 0.0, 600.0])
def test_expired_approval_does_not_run_whatever_the_skew(
    fake: FakeProvider, unit_guard: ag.Guard, offset: float
) -> None:
    """An approval whose expires_at has passed by the provider's clock is APPROVAL_EXPIRED."""
    fake.offset = offset
    fake.script[0] = ("approve", 0.5)  # expires inside the Date header's resolution
    ran: list[Any] = []
    out = make_tool(unit_guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.APPROVAL_EXPIRED == out.reason
    assert [] == ran
    assert unit_guard.ledger.get(out.request_id or "") is None  # the claim was given back


class HookedLedger(ag.MemoryLedger):
    """A memory ledger that calls ``before_claim`` at the start of every claim."""

    def __init__(self, before_claim: Callable[[], None]) -> None:
        super().__init__()
        self._before_claim = before_claim

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        self._before_claim()
        return super().claim(
            request_id, tool=tool, worker=worker, arguments_digest=arguments_digest
        )


def lose_the_ledger(clock: ManualClock) -> None:
    """A claim that cannot reach the record."""
    raise ag.LedgerError("connection lost")


@pytest.mark.parametrize(
    ("before_claim", "reason"),
    [
        # Time spent claiming counts: the expiry is checked after the claim, right before the call.
        pytest.param(
            lambda clock: clock.advance(120),
            ag.Reason.APPROVAL_EXPIRED,
            id="approval-expires-while-claiming",
        ),
        pytest.param(lose_the_ledger, ag.Reason.NOT_OBTAINED, id="ledger-unreachable"),
    ],
)
def test_an_approval_that_cannot_be_claimed_in_time_does_not_run(
    clock: ManualClock,
    fake: FakeProvider,
    before_claim: Callable[[ManualClock], None],
    reason: ag.Reason,
) -> None:
    """A claim that outlasts the approval or cannot reach the record: the tool does not run."""
    guard = make_guard(clock, ledger=HookedLedger(lambda: before_claim(clock)))
    fake.script[0] = ("approve", 60)
    ran: list[Any] = []
    out = make_tool(guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun) and reason == out.reason
    assert [] == ran


def test_missing_date_header_fails_closed(fake: FakeProvider, unit_guard: ag.Guard) -> None:
    """Without the provider's Date the expiry cannot be judged: the tool does not run."""
    fake.send_date = False
    fake.script[0] = ("approve", 300)
    ran: list[Any] = []
    out = make_tool(unit_guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran


@pytest.mark.parametrize(
    "fault",
    [
        status_fault(500),
        status_fault(502),
        status_fault(503),
        status_fault(504),
        status_fault(429, "rate_limited", "3"),
        status_fault(409, "idempotency_key_in_use"),
        raise_fault(requests.ConnectionError("reset")),
        raise_fault(requests.ReadTimeout("lost")),
    ],
)
def test_create_retries_with_same_key_and_bytes(
    fake: FakeProvider, unit_guard: ag.Guard, fault: Any
) -> None:
    """Transient create failures are retried with the same key and byte-identical body."""
    fake.faults = [fault, fault]
    fake.script[0] = ("approve", 300)
    ran: list[Any] = []
    assert {"refunded": 1} == make_tool(unit_guard, ran)("p", 1)
    creates = fake.creates
    assert 3 == len(creates)
    assert 1 == len({c[2]["Idempotency-Key"] for c in creates})
    assert 1 == len({c[3] for c in creates})
    assert 1 == len(fake.requests)


def retry_after_seconds(seconds: int) -> Callable[[FakeProvider], str]:
    """Retry-After as delay-seconds."""
    return lambda fake: str(seconds)


def retry_after_date(seconds: int) -> Callable[[FakeProvider], str]:
    """Retry-After as the HTTP date ``seconds`` after the provider's now."""
    return lambda fake: format_http_date(fake.pnow() + timedelta(seconds=seconds))


@pytest.mark.parametrize(
    ("code", "kind", "retry_after", "shortest", "longest"),
    [
        pytest.param(429, "rate_limited", retry_after_seconds(7), 7.0, 7.0, id="429-seconds"),
        # An HTTP date is measured against the provider's Date, to its one-second resolution.
        pytest.param(503, "unavailable", retry_after_date(12), 11.0, 12.0, id="503-http-date"),
    ],
)
def test_retry_after_delays_the_retry_by_that_long(
    clock: ManualClock,
    fake: FakeProvider,
    unit_guard: ag.Guard,
    code: int,
    kind: str,
    retry_after: Callable[[FakeProvider], str],
    shortest: float,
    longest: float,
) -> None:
    """Retry-After, in seconds or as an HTTP date, is how long the one retry waits."""
    fake.faults = [status_fault(code, kind, retry_after(fake))]
    fake.script[0] = ("approve", 300)
    make_tool(unit_guard, [])("p", 1)
    assert 1 == len(clock.sleeps)
    assert shortest <= clock.sleeps[0] <= longest


def test_backoff_is_capped_full_jitter(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """Retry delays grow but stay within the cap and are jittered."""
    fake.faults = [status_fault(503)] * 12
    fake.script[0] = ("approve", 300)
    make_tool(unit_guard, [])("p", 1)
    assert 12 == len(clock.sleeps)
    assert all(0 <= s <= 5.0 for s in clock.sleeps)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (400, "invalid_request"),
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "not_found"),
        (422, "idempotency_key_reused"),
    ],
)
def test_refused_create_is_not_obtained_and_not_retried(
    fake: FakeProvider,
    unit_guard: ag.Guard,
    caplog: pytest.LogCaptureFixture,
    code: int,
    kind: str,
) -> None:
    """4xx answers are final: NOT_OBTAINED saying what the provider said, logged at ERROR."""
    fake.faults = [status_fault(code, kind)]
    ran: list[Any] = []
    with caplog.at_level(logging.ERROR, logger="approval_guard"):
        out = make_tool(unit_guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert str(code) in out.message and kind in out.message
    assert "denied" not in out.message
    assert 1 == len(fake.creates)
    assert any(r.levelno == logging.ERROR and kind in r.getMessage() for r in caplog.records)
    assert [] == ran


@pytest.mark.parametrize(
    "fault",
    [
        status_fault(500),
        status_fault(503, "unavailable", "2"),
        raise_fault(requests.ReadTimeout("read timed out")),
        raise_fault(requests.ConnectionError("reset")),
        lambda: (200, {}, "<html>garbage</html>"),
        lambda: (200, {}, "[1, 2]"),
    ],
)
def test_poll_failures_are_retried_not_taken_as_a_decision(
    fake: FakeProvider, unit_guard: ag.Guard, fault: Any
) -> None:
    """Read timeouts, resets, garbage and 5xx while polling are retried, never expiry or denial."""
    fake.script[45] = ("approve", 300)
    fake.faults = [None, fault, fault, fault]  # the create is fine; three polls fail
    ran: list[Any] = []
    assert {"refunded": 1} == make_tool(unit_guard, ran)("p", 1)
    assert 1 == len(ran)


def test_oversized_answer_is_refused(fake: FakeProvider, unit_guard: ag.Guard) -> None:
    """An answer over 1 MiB is not parsed; the tool does not run."""
    huge = json.dumps({"padding": "x" * (MAX_ANSWER_BYTES + 10)})
    fake.faults = [lambda: (200, {}, huge)] * 400
    ran: list[Any] = []
    out = make_tool(unit_guard, ran, timeout="1m")("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran


def test_requested_timeout_is_clamped_to_the_harness_limit(
    fake: FakeProvider, unit_guard: ag.Guard, caplog: pytest.LogCaptureFixture
) -> None:
    """timeout = min(tool timeout, limit - return_margin - deadline_margin), with a warning."""
    fake.script[0] = ("approve", 300)
    with caplog.at_level(logging.WARNING, logger="approval_guard"), ag.harness_call(limit="10m"):
        make_tool(unit_guard, [], timeout="30m")("p", 1)
    assert "9m50s" == json.loads(fake.creates[0][3] or b"")["timeout"]
    assert any("clamped" in r.getMessage() for r in caplog.records)


def test_too_little_time_creates_nothing(fake: FakeProvider, clock: ManualClock) -> None:
    """With under a second left to ask, nothing is created and the outcome is NOT_OBTAINED."""
    guard = make_guard(clock, harness_limit="11s", return_margin="5s", deadline_margin="5s")
    with ag.harness_call(limit="10s"):
        out = make_tool(guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert out.request_id is None
    assert [] == fake.creates


def test_wait_ends_at_harness_limit_and_cancels(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """Reaching our own limit is NOT_OBTAINED, and the pending request is cancelled."""
    # 20 s of retried creates: the provider's deadline now ends after our own limit.
    fake.faults = [status_fault(503, "unavailable", "10")] * 2
    start = clock.monotonic()
    with ag.harness_call(limit="3m"):
        out = make_tool(unit_guard, [], timeout="30m")("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "nobody denied" in out.message
    assert 1 == len(fake.cancels)
    assert clock.monotonic() - start <= 180 - 5
    assert all("wait=" in url for _, url, _, _ in fake.polls)


def test_each_poll_waits_at_most_the_time_left(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """Each wait is min(poll_wait, time left), so the last poll is shorter."""
    with ag.harness_call(limit="75s"):
        make_tool(unit_guard, [], timeout="30m")("p", 1)
    waits = [int(url.rsplit("wait=", 1)[1].rstrip("s")) for _, url, _, _ in fake.polls]
    assert 30 == waits[0]
    assert waits[-1] < 30
    assert sum(waits) <= 75 - 5


def test_wait_ends_after_deadline_plus_margin(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """The wait follows the provider's deadline (mapped to our clock) plus deadline_margin."""
    fake.faults = [None] + [status_fault(503)] * 10_000  # the provider never answers a poll
    start = clock.monotonic()
    out = make_tool(unit_guard, [], timeout="2m")("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert 120 <= clock.monotonic() - start <= 120 + 5 + 1


def test_abandon_before_create_sends_nothing(fake: FakeProvider, unit_guard: ag.Guard) -> None:
    """An already-abandoned call creates nothing and is CANCELLED."""
    gone = threading.Event()
    gone.set()
    with ag.harness_call(abandon=gone):
        out = make_tool(unit_guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert [] == fake.creates


def test_recovered_approval_already_run_is_not_run_again(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """A replayed key that returns the same approval finds the record: ALREADY_EXECUTED."""
    fake.script[0] = ("approve", 300)
    ran: list[Any] = []
    tool = make_tool(unit_guard, ran)
    with ag.harness_call(idempotency_key="toolcall_1"):
        assert {"refunded": 1} == tool("p", 1)
    with ag.harness_call(idempotency_key="toolcall_1"):
        again = tool("p", 1)
    assert isinstance(again, ag.NotRun) and ag.Reason.ALREADY_EXECUTED == again.reason
    assert 1 == len(ran)
    assert 1 == len(fake.requests)


def test_replay_body_does_not_depend_on_time_spent(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """A harness retry with the same key and a fresh limit sends byte-identical bytes."""
    fake.script[0] = ("approve", 300)
    tool = make_tool(unit_guard, [])
    with ag.harness_call(idempotency_key="k1", limit="10m"):
        tool("p", 1)
    clock.advance(37.4)
    with ag.harness_call(idempotency_key="k1", limit="10m"):
        tool("p", 1)
    assert fake.creates[0][3] == fake.creates[1][3]


def test_tool_exception_propagates_and_is_recorded(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """The tool's own exception propagates unchanged and the record says it ran (failed)."""
    fake.script[0] = ("approve", 300)
    boom = RuntimeError("card network down")

    @unit_guard.requires_approval(timeout="30m")
    def charge(x: int) -> None:
        raise boom

    with pytest.raises(RuntimeError) as info:
        charge(1)
    assert boom is info.value
    (row,) = unit_guard.ledger.recent()
    assert "failed" == row.state and "card network down" in (row.error or "")


def test_unserialisable_argument_sends_nothing(fake: FakeProvider, unit_guard: ag.Guard) -> None:
    """A TypeError for an argument that cannot be JSON, before any request."""

    @unit_guard.requires_approval(timeout="30m")
    def send(payload: Any) -> None: ...

    with pytest.raises(TypeError):
        send(object())
    assert [] == fake.calls


def test_logging_lines_and_no_secret(
    fake: FakeProvider, unit_guard: ag.Guard, caplog: pytest.LogCaptureFixture
) -> None:
    """INFO on create and decision, DEBUG per poll, and the credential never logged."""
    fake.script[35] = ("approve", 300)
    with caplog.at_level(logging.DEBUG, logger="approval_guard"):
        make_tool(unit_guard, [])("p", 1)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    debugs = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(
        "created" in m and "provider_request_id=" in m and "deadline_at=" in m for m in infos
    )
    assert any("decided" in m and "approved" in m for m in infos)
    assert 2 == len(debugs)
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_not_run_carries_no_secret(fake: FakeProvider, unit_guard: ag.Guard) -> None:
    """No outcome field or message carries the credential."""
    fake.faults = [status_fault(401, "unauthorized")]
    out = make_tool(unit_guard, [])("p", 1)
    assert SECRET not in repr(out) and SECRET not in out.to_json()


def test_give_up_cancel_stays_inside_the_harness_limit(
    clock: ManualClock, fake: FakeProvider
) -> None:
    """A failing cancel is retried, but never past the harness's own limit."""
    guard = make_guard(clock, harness_limit="1m", return_margin="1s", deadline_margin="1s")
    # Creates retried for 20 s, so our limit comes before the provider's deadline;
    # then every cancel attempt fails.
    fake.faults = [status_fault(503, "unavailable", "10")] * 2 + [None] * 200

    def failing_cancel(request: Any) -> Any:
        _, read_timeout = request.req_kwargs["timeout"]
        clock.advance(min(0.3, read_timeout))  # slow, but a timeout cuts it short
        return 503, {}, json.dumps({"error": {"type": "unavailable", "message": "down"}})

    fake.cancel_fault = failing_cancel
    start = clock.monotonic()
    with ag.harness_call(limit="1m"):
        out = make_tool(guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert clock.monotonic() - start <= 60
    assert "could not be withdrawn" in out.message
    assert 2 <= len(fake.cancels)  # retried, within the budget


def test_on_not_run_turns_the_outcome_into_what_the_caller_wants(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """on_not_run=str returns the plain sentence; a call that ran is untouched."""
    ran: list[Any] = []
    tool = make_tool(unit_guard, ran, on_not_run=str)
    fake.script[0] = ("deny", "no")
    assert (
        "A person denied this call to issue_refund: no. Do not retry the same call: tell the "
        "user it was denied, and ask how to go on." == tool("p", 1)
    )
    fake.script[0] = ("approve", 300)
    assert {"refunded": 2} == tool("p", 2)


def test_on_not_run_must_be_callable(unit_guard: ag.Guard) -> None:
    """A bad on_not_run raises at decoration."""
    with pytest.raises(ValueError, match="on_not_run"):
        unit_guard.requires_approval(on_not_run="str")  # type: ignore[call-overload]


def test_started_at_counts_the_harness_limit_from_the_first_attempt(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """A call first started longer ago than its limit is NOT_OBTAINED at once: nothing is sent."""
    first = clock.now() - timedelta(minutes=4)
    with ag.harness_call(limit="3m", started_at=first, idempotency_key="toolcall_late"):
        out = make_tool(unit_guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == fake.creates and [] == fake.cancels


def test_started_at_leaves_the_rest_of_the_limit_and_the_same_request(
    clock: ManualClock, fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """Started 2 minutes ago with a 3-minute limit: the same body, and the wait ends a minute on."""
    with ag.harness_call(limit="3m", idempotency_key="toolcall_fresh"):
        make_tool(unit_guard, [])("p", 1)
    start = clock.monotonic()
    first = clock.now() - timedelta(minutes=2)
    with ag.harness_call(limit="3m", started_at=first, idempotency_key="toolcall_again"):
        out = make_tool(unit_guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert fake.creates[0][3] == fake.creates[-1][3]  # the same bytes as a first attempt
    assert 50 <= clock.monotonic() - start <= 60


def test_started_at_must_have_a_time_zone() -> None:
    """A naive datetime is refused when harness_call is entered."""
    with (
        pytest.raises(ag.ConfigurationError, match="started_at"),
        ag.harness_call(started_at=datetime(2026, 1, 1)),
    ):
        pass
