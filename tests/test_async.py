"""Guarded ``async def`` tools, against the local provider over real HTTP.

Each test runs its own event loop with ``asyncio.run``; the reviewer is either
a policy of the provider or a thread playing the person.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after

CANCELLED = "cancelled"


def _keys_and_timeouts(provider: LocalProvider) -> dict[str, str]:
    """Idempotency key -> requested timeout of every request the provider holds."""
    with provider.store.transaction() as db:
        rows = db.execute("SELECT idempotency_key, timeout FROM requests").fetchall()
    return {key: timeout for key, timeout in rows}


def _wait_for_status(
    provider: LocalProvider, request_id: str, status: str, within: float
) -> float | None:
    """Seconds until ``request_id`` has ``status`` at the provider, or None after ``within``."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        if provider.get(request_id).status == status:
            return time.monotonic() - start
        time.sleep(0.01)
    return None


def _reviewer(
    provider: LocalProvider, after: float, decide: Callable[[str], Any]
) -> threading.Thread:
    """A person in another thread: waits for the next request, thinks ``after`` s, decides."""

    def review() -> None:
        request = provider.next_request(timeout=10)
        time.sleep(after)
        decide(request.id)

    thread = threading.Thread(target=review, daemon=True)
    thread.start()
    return thread


def test_guarded_async_def_is_a_coroutine_function(guard: ag.Guard) -> None:
    """@requires_approval on an async def gives an async def."""

    async def lookup(order_id: str) -> str:
        return order_id

    guarded = guard.requires_approval(timeout="1m")(lookup)
    assert inspect.iscoroutinefunction(guarded)
    assert inspect.signature(lookup) == inspect.signature(guarded)


def test_waiting_never_blocks_the_event_loop(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """A ticking task keeps its rate while a guarded call waits a second for approval."""
    period = 0.02

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return f"refunded {payment_id}"

    async def main() -> tuple[Any, float, list[float]]:
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(period)

        ticking = asyncio.create_task(ticker())
        reviewer = _reviewer(approval_provider, 1.0, approval_provider.approve)
        start = time.monotonic()
        result = await refund("payment_1")
        waited = time.monotonic() - start
        ticking.cancel()
        reviewer.join(5)
        return result, waited, ticks

    result, waited, ticks = asyncio.run(main())
    assert "refunded payment_1" == result
    assert waited >= 0.9
    gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
    # Generous bounds: a blocked loop would show one gap of about a second.
    assert max(gaps) < 0.25
    assert len(ticks) >= 0.5 * waited / period


def test_approved_async_call_runs_and_returns(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """An approved async tool runs once, with the caller's objects, and its value comes back."""
    approval_provider.policy = approve_after(0.05)
    calls: list[tuple[str, int]] = []

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str, amount: int) -> dict[str, Any]:
        calls.append((payment_id, amount))
        await asyncio.sleep(0)
        return {"refunded": amount}

    assert {"refunded": 4900} == asyncio.run(refund("payment_1", amount=4900))
    assert [("payment_1", 4900)] == calls
    [request] = approval_provider.requests()
    assert {"payment_id": "payment_1", "amount": 4900} == request.arguments
    execution = guard.ledger.get(request.id)
    assert execution is not None
    assert "finished" == execution.state


def test_denied_async_call_returns_not_run(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """A denied async tool does not run and returns NotRun(DENIED) with the note."""
    approval_provider.policy = deny_after(0.05, "not this customer")
    calls: list[str] = []

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        calls.append(payment_id)
        return "refunded"

    result = asyncio.run(refund("payment_1"))
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.DENIED == result.reason
    assert "not this customer" == result.note
    assert [] == calls


def test_async_call_survives_a_failed_create_and_a_dropped_poll(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """A 503 on create and a dropped poll are retried; one request is created and it runs."""
    approval_provider.faults.add("status", on="create", status=503)
    approval_provider.faults.add("drop_after_commit", on="poll")
    approval_provider.policy = approve_after(0.3)

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return f"refunded {payment_id}"

    assert "refunded payment_1" == asyncio.run(refund("payment_1"))
    assert [("status", "create"), ("drop_after_commit", "poll")] == [
        (fault.kind, fault.exchange) for fault in approval_provider.faults.log
    ]
    assert 1 == approval_provider.stats.created
    assert 2 == approval_provider.stats.creates
    assert approval_provider.stats.polls >= 2


def test_async_call_checks_the_expiry_last(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """An approval that has already expired does not run the async tool."""
    approval_provider.policy = approve_after(0.05, valid_for=-60)
    calls: list[str] = []

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        calls.append(payment_id)
        return "refunded"

    result = asyncio.run(refund("payment_1"))
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.APPROVAL_EXPIRED == result.reason
    assert [] == calls


def test_async_call_gives_up_at_the_harness_limit(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """With nobody deciding, the wait ends at the harness's limit: NOT_OBTAINED, not denied."""

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return "refunded"

    async def main() -> Any:
        with ag.harness_call(limit="4s"):
            return await refund("payment_1")

    start = time.monotonic()
    result = asyncio.run(main())
    assert time.monotonic() - start < 6
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == result.reason
    [request] = approval_provider.requests()
    assert "2s" == request.timeout  # 4s less the test guard's two 1s margins
    assert "pending" != approval_provider.get(request.id).status


def test_cancelling_the_task_cancels_the_request(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """Cancelling the awaiting task cancels the pending request and CancelledError propagates."""
    calls: list[str] = []

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        calls.append(payment_id)
        return "refunded"

    async def main() -> tuple[str, float]:
        task = asyncio.create_task(refund("payment_1"))
        request = await asyncio.to_thread(approval_provider.next_request, 5)
        assert await asyncio.to_thread(approval_provider.wait_for_polls, 1, 5)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return request.id, cancelled_at

    request_id, cancelled_at = asyncio.run(main())
    waited = _wait_for_status(approval_provider, request_id, CANCELLED, within=2.0)
    assert waited is not None
    assert time.monotonic() - cancelled_at < 1.5
    assert [] == calls
    assert 1 == approval_provider.stats.cancels


def test_cancelling_during_the_create_still_cancels_the_request(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """A cancel that lands while the create is in flight cancels the request it made."""
    approval_provider.faults.add("delay", on="create", delay=0.5)

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return "refunded"

    async def main() -> None:
        task = asyncio.create_task(refund("payment_1"))
        while not approval_provider.faults.log:  # the create has reached the provider
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    [request] = approval_provider.requests()
    assert CANCELLED == request.status
    assert 0 == approval_provider.stats.polls


def test_harness_call_applies_inside_async_code(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """harness_call's key and limit reach the provider from an async tool."""
    approval_provider.policy = approve_after(0.05)

    @guard.requires_approval(timeout="30m")
    async def refund(payment_id: str) -> str:
        return "refunded"

    async def main() -> Any:
        with ag.harness_call(idempotency_key="toolcall_async_1", limit="90s"):
            return await refund("payment_1")

    assert "refunded" == asyncio.run(main())
    assert {"toolcall_async_1": "1m28s"} == _keys_and_timeouts(approval_provider)


def test_concurrent_tasks_do_not_see_each_others_harness_call(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """Two tasks inside their own harness_call at once each send their own key and limit."""
    approval_provider.policy = approve_after(0.2)

    @guard.requires_approval(timeout="30m")
    async def refund(payment_id: str) -> str:
        return f"refunded {payment_id}"

    async def main() -> list[Any]:
        inside = 0
        both_inside = asyncio.Event()

        async def call(key: str, limit: str, payment_id: str) -> Any:
            nonlocal inside
            with ag.harness_call(idempotency_key=key, limit=limit):
                # Both blocks are open before either call starts.
                inside += 1
                if inside == 2:
                    both_inside.set()
                await both_inside.wait()
                return await refund(payment_id)

        return await asyncio.gather(
            call("toolcall_a", "60s", "payment_a"), call("toolcall_b", "90s", "payment_b")
        )

    assert ["refunded payment_a", "refunded payment_b"] == asyncio.run(main())
    assert {"toolcall_a": "58s", "toolcall_b": "1m28s"} == _keys_and_timeouts(approval_provider)
    by_key = {
        request.arguments["payment_id"]: request.timeout for request in approval_provider.requests()
    }
    assert {"payment_a": "58s", "payment_b": "1m28s"} == by_key


def test_abandon_event_abandons_an_async_call(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """harness_call(abandon=event) in async: NotRun(CANCELLED) and the request is cancelled."""
    abandon = threading.Event()

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return "refunded"

    async def main() -> tuple[Any, str, float]:
        with ag.harness_call(abandon=abandon):
            task = asyncio.create_task(refund("payment_1"))
        request = await asyncio.to_thread(approval_provider.next_request, 5)
        assert await asyncio.to_thread(approval_provider.wait_for_polls, 1, 5)
        abandon.set()
        set_at = time.monotonic()
        return await task, request.id, set_at

    result, request_id, set_at = asyncio.run(main())
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.CANCELLED == result.reason
    assert _wait_for_status(approval_provider, request_id, CANCELLED, within=2.0) is not None
    assert time.monotonic() - set_at < 1.5


def test_fifty_concurrent_async_calls_each_run_once(
    approval_provider: LocalProvider, guard: ag.Guard
) -> None:
    """Fifty guarded calls on one loop, all approved: each runs exactly once."""
    approval_provider.policy = approve_after(0.05)
    runs: collections.Counter[int] = collections.Counter()

    @guard.requires_approval(timeout="1m")
    async def refund(n: int) -> int:
        runs[n] += 1
        return n

    async def main() -> list[Any]:
        return await asyncio.gather(*(refund(n) for n in range(50)))

    assert list(range(50)) == asyncio.run(main())
    assert {n: 1 for n in range(50)} == dict(runs)
    assert 50 == approval_provider.stats.created


def test_cancelling_during_the_claim_gives_the_claim_back(
    approval_provider: LocalProvider,
) -> None:
    """A cancel that lands while the record is claimed: the tool does not run, nor count as run."""
    claiming = threading.Event()

    class SlowLedger(ag.MemoryLedger):
        def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
            claiming.set()
            time.sleep(0.3)
            return super().claim(request_id, tool=tool, worker=worker)

    ledger = SlowLedger()
    guard = ag.Guard(base_url=approval_provider.url, credential=approval_provider.credential,
                     ledger=ledger)
    approval_provider.policy = approve_after(0.0)
    ran: list[str] = []

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        ran.append(payment_id)
        return "refunded"

    async def main() -> None:
        task = asyncio.create_task(refund("payment_1"))
        while not claiming.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert [] == ran
    assert [] == ledger.recent()  # released: a retry with the same key may still run it
