"""Guarded sync tools against the real local provider over HTTP: each outcome, each fault,
clock skew, threads, Ctrl-C and a provider restart.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider, Timings, approve_after
from tests.support.api import wait_for
from tests.support.guards import ctrl_c_during, finish, in_thread, make_guard, refund_tool


def test_approved_by_a_person_runs_the_tool(provider: LocalProvider) -> None:
    """A reviewer's approval arriving during a long poll lets the tool run once."""
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran)
    thread, box = in_thread(lambda: tool("payment_123", 4900))
    request = provider.next_request(timeout=10)
    assert {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"} == request.arguments
    provider.approve(request.id, note="duplicate confirmed")
    assert {"refund_id": "re_1", "amount": 4900} == finish(thread, box)
    assert [("payment_123", 4900, "GBP")] == ran


def test_denied_by_a_person_is_denied(provider: LocalProvider) -> None:
    """A reviewer's denial returns DENIED with the note; the tool does not run."""
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran)
    thread, box = in_thread(lambda: tool("payment_123", 4900))
    provider.deny(provider.next_request(timeout=10).id, "Not a duplicate.")
    out = finish(thread, box)
    assert isinstance(out, ag.NotRun) and ag.Reason.DENIED == out.reason
    assert "Not a duplicate." == out.note
    assert [] == ran


def test_undecided_request_expires_as_not_obtained(provider: LocalProvider) -> None:
    """Nobody decides within the timeout: NOT_OBTAINED, bounded in time, never DENIED."""
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran, timeout="2s")
    started = time.monotonic()
    out = tool("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "expired" == out.status
    assert time.monotonic() - started < 2 + 1 + 2  # timeout + deadline margin + slack
    assert [] == ran


def test_harness_limit_ends_the_wait_and_cancels(provider: LocalProvider) -> None:
    """The harness's limit comes first: NOT_OBTAINED, and the request is cancelled."""
    provider.faults.add("status", on="create", status=503, retry_after=2)
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran)
    started = time.monotonic()
    with ag.harness_call(limit="5s"):
        out = tool("p", 1)
    elapsed = time.monotonic() - started
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert elapsed < 5
    assert "cancelled" == provider.get(out.request_id or "").status
    assert [] == ran


def test_cancelled_at_provider_is_cancelled(provider: LocalProvider) -> None:
    """A request withdrawn at the provider comes back CANCELLED."""
    tool = refund_tool(make_guard(provider), [])
    thread, box = in_thread(lambda: tool("p", 1))
    provider.cancel(provider.next_request(timeout=10).id, reason="withdrawn")
    out = finish(thread, box)
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "drop_after_commit"},
        {"kind": "reset_before"},
        {"kind": "garbage"},
        {"kind": "status", "status": 500},
        {"kind": "status", "status": 503},
        {"kind": "status", "status": 429, "retry_after": 1},
    ],
    ids=lambda f: f"{f['kind']}-{f.get('status', '')}",
)
def test_create_faults_recover_the_same_single_request(
    provider: LocalProvider, fault: dict[str, Any]
) -> None:
    """A lost or failed create is retried with the same key: one request, one run."""
    kind = fault.pop("kind")
    provider.faults.add(kind, on="create", times=2, **fault)
    provider.policy = approve_after(0.05)
    ran: list[Any] = []
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(make_guard(provider), ran)("p", 1)
    assert 1 == provider.stats.created
    assert 3 == provider.stats.creates
    assert 1 == len(ran)


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "reset_before"},
        {"kind": "garbage"},
        {"kind": "status", "status": 502},
        {"kind": "status", "status": 429, "retry_after": 1},
        {"kind": "delay", "delay": 1.5},
    ],
    ids=lambda f: f"{f['kind']}-{f.get('status', '')}",
)
def test_poll_faults_are_not_decisions(provider: LocalProvider, fault: dict[str, Any]) -> None:
    """Poll failures (including a read timeout) are retried; the approval still arrives."""
    kind = fault.pop("kind")
    provider.faults.add(kind, on="poll", times=2, **fault)
    ran: list[Any] = []
    # A short read slack, so that a 1.5 s delay outlasts the read.
    guard = make_guard(provider, poll_wait="1s", timings=Timings(read_slack=0.5))
    tool = refund_tool(guard, ran)
    thread, box = in_thread(lambda: tool("p", 1))
    request = provider.next_request(timeout=10)
    wait_for(lambda: not provider.faults.pending, timeout=20)
    assert provider.wait_for_polls(1, timeout=20)  # a healthy poll is waiting again
    provider.approve(request.id)
    assert {"refund_id": "re_1", "amount": 1} == finish(thread, box)
    assert [kind, kind] == [f.kind for f in provider.faults.log]
    assert 1 == len(ran)


@pytest.mark.parametrize("minutes", [-10, 10])
def test_provider_clock_skew_keeps_a_valid_approval_valid(minutes: int) -> None:
    """A provider clock ten minutes off either way: a 5-minute approval still runs."""
    with LocalProvider(clock_offset=timedelta(minutes=minutes), policy=approve_after(0.05)) as p:
        ran: list[Any] = []
        assert {"refund_id": "re_1", "amount": 1} == refund_tool(make_guard(p), ran)("p", 1)


@pytest.mark.parametrize("minutes", [-10, 0, 10])
def test_provider_clock_skew_keeps_an_expired_approval_expired(minutes: int) -> None:
    """An approval already expired by the provider's clock never runs, whatever the skew."""
    with LocalProvider(clock_offset=timedelta(minutes=minutes)) as p:
        ran: list[Any] = []
        tool = refund_tool(make_guard(p), ran)
        thread, box = in_thread(lambda: tool("p", 1))
        p.approve(p.next_request(timeout=10).id, valid_for=-1)
        out = finish(thread, box)
        assert isinstance(out, ag.NotRun) and ag.Reason.APPROVAL_EXPIRED == out.reason
        assert [] == ran


def test_replay_after_lost_create_answer_recovers_the_approval(provider: LocalProvider) -> None:
    """A harness retry with the same key after a lost answer finds the approval and runs once."""
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran)
    provider.faults.add("drop_after_commit", on="create", times=50)
    provider.policy = approve_after(0.0)
    with ag.harness_call(idempotency_key="toolcall_lost", limit="3s"):
        first = tool("p", 1)
    assert isinstance(first, ag.NotRun) and ag.Reason.NOT_OBTAINED == first.reason
    assert [] == ran
    provider.faults.clear()
    # The harness retries with the same key and the same (fresh, full) limit.
    with ag.harness_call(idempotency_key="toolcall_lost", limit="3s"):
        assert {"refund_id": "re_1", "amount": 1} == tool("p", 1)
    with ag.harness_call(idempotency_key="toolcall_lost", limit="3s"):
        again = tool("p", 1)
    assert isinstance(again, ag.NotRun) and ag.Reason.ALREADY_EXECUTED == again.reason
    assert 1 == provider.stats.created
    assert 1 == len(ran)


def test_sixteen_threads_each_run_once(provider: LocalProvider) -> None:
    """16 threads calling one Guard at once: every call is its own request and runs once."""
    provider.policy = approve_after(0.05)
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran)
    barrier = threading.Barrier(16)

    def call(i: int) -> Any:
        barrier.wait()
        return tool(f"p{i}", i)

    threads = [in_thread(functools.partial(call, i)) for i in range(16)]
    results = [finish(t, box) for t, box in threads]
    assert [{"refund_id": "re_1", "amount": i} for i in range(16)] == results
    assert sorted((f"p{i}", i, "GBP") for i in range(16)) == sorted(ran)
    assert 16 == provider.stats.created


def test_abandon_during_long_poll_cancels_within_a_second(provider: LocalProvider) -> None:
    """The harness gives up mid-poll: CANCELLED within about a second, request cancelled."""
    gone = threading.Event()
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider, poll_wait="30s"), ran)

    def call() -> Any:
        with ag.harness_call(abandon=gone):
            return tool("p", 1)

    thread, box = in_thread(call)
    request = provider.next_request(timeout=10)
    assert provider.wait_for_polls(1, timeout=10)  # inside its 30 s long poll
    gone.set()
    set_at = time.monotonic()
    out = finish(thread, box, timeout=10)
    assert time.monotonic() - set_at < 1.5
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert "cancelled" == provider.get(request.id).status
    assert [] == ran


def test_keyboard_interrupt_cancels_then_propagates(provider: LocalProvider) -> None:
    """Ctrl-C while waiting: the request is cancelled, then KeyboardInterrupt is re-raised."""
    tool = refund_tool(make_guard(provider, poll_wait="30s"), [])
    with pytest.raises(KeyboardInterrupt):
        ctrl_c_during(lambda: tool("p", 1), after=0.8)
    (request,) = provider.requests()
    assert "cancelled" == request.status


def test_unreachable_provider_is_not_obtained_within_the_limit() -> None:
    """No provider listening: NOT_OBTAINED within the harness limit, never DENIED."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    guard = ag.Guard(
        base_url=f"http://127.0.0.1:{port}",
        credential="agi_x",
        harness_limit="4s",
        return_margin="1s",
        deadline_margin="1s",
    )
    ran: list[Any] = []
    started = time.monotonic()
    out = refund_tool(guard, ran)("p", 1)
    assert time.monotonic() - started < 4
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "reached" in out.message
    assert [] == ran


def test_wrong_credential_is_not_obtained(provider: LocalProvider) -> None:
    """A 401 is reported as the provider's refusal, not a denial."""
    guard = ag.Guard(base_url=provider.url, credential="agi_wrong")
    out = refund_tool(guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "401" in out.message and "unauthorized" in out.message


def test_wait_survives_a_provider_restart(tmp_path: Path) -> None:
    """The provider dies mid-wait and comes back: the wait goes on and the approval arrives."""
    with LocalProvider(str(tmp_path / "approvals.sqlite3")) as p:
        ran: list[Any] = []
        tool = refund_tool(make_guard(p, poll_wait="2s"), ran)
        thread, box = in_thread(lambda: tool("p", 1))
        request = p.next_request(timeout=10)
        p.stop()
        time.sleep(1.0)
        p.start()
        p.approve(request.id)
        assert {"refund_id": "re_1", "amount": 1} == finish(thread, box)
        assert 1 == len(ran)


def test_crash_after_start_counts_as_run_with_sqlite(tmp_path: Path) -> None:
    """A record left 'started' (a crash mid-call) stops the recovered approval from running."""
    db = str(tmp_path / "ledger.sqlite3")
    with LocalProvider(policy=approve_after(0.0)) as p:
        first = ag.SQLiteLedger(db)
        ran: list[Any] = []
        tool = refund_tool(make_guard(p, ledger=first), ran)
        with ag.harness_call(idempotency_key="tc_crash"):
            tool("p", 1)
        # A second process on the same file (a restarted worker) replays the same key.
        second = ag.SQLiteLedger(db)
        tool2 = refund_tool(make_guard(p, ledger=second), ran)
        with ag.harness_call(idempotency_key="tc_crash"):
            out = tool2("p", 1)
        assert isinstance(out, ag.NotRun) and ag.Reason.ALREADY_EXECUTED == out.reason
        assert 1 == len(ran)
