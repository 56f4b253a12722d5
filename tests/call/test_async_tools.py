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
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

import approval_guard as ag
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.testing import LocalProvider, Policy, approve_after, deny_after
from tests.support.api import wait_for

CANCELLED = "cancelled"
T = TypeVar("T")


def _keys_and_timeouts(provider: LocalProvider) -> dict[str, str]:
    """Idempotency key -> requested timeout of every request the provider holds."""
    with provider.store.transaction() as db:
        rows = db.execute("SELECT idempotency_key, timeout FROM requests").fetchall()
    return {key: timeout for key, timeout in rows}


def _eventually(check: Callable[[], bool], within: float) -> float | None:
    """Seconds until ``check()`` is true, or None after ``within``."""
    start = time.monotonic()
    try:
        wait_for(check, timeout=within)
    except AssertionError:
        return None
    return time.monotonic() - start


def _wait_for_status(
    provider: LocalProvider, request_id: str, status: str, within: float
) -> float | None:
    """Seconds until ``request_id`` has ``status`` at the provider, or None after ``within``."""
    return _eventually(lambda: status == provider.get(request_id).status, within)


def _reviewer(
    provider: LocalProvider, ready: Callable[[], object], decide: Callable[[str], Any]
) -> threading.Thread:
    """A person in another thread: waits for the next request, then until ``ready()``, decides."""

    def review() -> None:
        request = provider.next_request(timeout=10)
        try:
            wait_for(ready, timeout=10)
        finally:
            decide(request.id)

    thread = threading.Thread(target=review, daemon=True)
    thread.start()
    return thread


def _refund_tool(guard: ag.Guard, ran: list[str], *, timeout: str = "1m") -> Any:
    """A guarded async refund tool that records each run's payment_id in ``ran``."""

    @guard.requires_approval(timeout=timeout)
    async def refund(payment_id: str) -> str:
        ran.append(payment_id)
        await asyncio.sleep(0)
        return f"refunded {payment_id}"

    return refund


async def _until(happened: Callable[[], object]) -> None:
    """Yield to the loop until ``happened()`` is true."""
    while not happened():
        await asyncio.sleep(0.01)


async def _first_polled_request(provider: LocalProvider) -> ApprovalRequest:
    """The next request the provider gets, once the call is waiting on its first poll."""
    request = await asyncio.to_thread(provider.next_request, 5)
    assert await asyncio.to_thread(provider.wait_for_polls, 1, 5)
    return request


async def _cancel_when(call: Coroutine[Any, Any, Any], ready: Awaitable[T]) -> tuple[T, float]:
    """Run ``call`` as a task, cancel it once ``ready`` is done, and see CancelledError come out.

    Returns what ``ready`` gave and the monotonic time of the cancel.
    """
    task = asyncio.create_task(call)
    value = await ready
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return value, cancelled_at


def test_guarded_async_def_is_a_coroutine_function(guard: ag.Guard) -> None:
    """@requires_approval on an async def gives an async def."""

    async def lookup(order_id: str) -> str:
        return order_id

    guarded = guard.requires_approval(timeout="1m")(lookup)
    assert inspect.iscoroutinefunction(guarded)
    assert inspect.signature(lookup) == inspect.signature(guarded)


def test_waiting_never_blocks_the_event_loop(provider: LocalProvider, guard: ag.Guard) -> None:
    """A ticking task keeps its rate while a guarded call waits for approval."""
    period = 0.02
    refund = _refund_tool(guard, [])

    async def main() -> tuple[Any, float, list[float]]:
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(period)

        ticking = asyncio.create_task(ticker())
        # Approved once the call waits on its poll and the ticker has ticked on
        # meanwhile (some 50 periods): a loop blocked by the wait never gets there.
        polling = threading.Event()

        def ready() -> bool:
            if not polling.is_set() and provider.wait_for_polls(1, 0):
                polling.set()
                del ticks[:]  # count only the ticks while the call waits
            return polling.is_set() and len(ticks) >= 50

        reviewer = _reviewer(provider, ready, provider.approve)
        start = time.monotonic()
        result = await refund("payment_1")
        waited = time.monotonic() - start
        ticking.cancel()
        reviewer.join(5)
        return result, waited, ticks

    result, waited, ticks = asyncio.run(main())
    assert "refunded payment_1" == result
    assert len(ticks) >= 50
    gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
    # Generous bounds: a blocked loop would show one gap of about a second.
    assert max(gaps) < 0.6
    assert len(ticks) >= 0.5 * waited / period


def test_approved_async_call_runs_and_returns(provider: LocalProvider, guard: ag.Guard) -> None:
    """An approved async tool runs once, with the caller's objects, and its value comes back."""
    provider.policy = approve_after(0.05)
    calls: list[tuple[str, int]] = []

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str, amount: int) -> dict[str, Any]:
        calls.append((payment_id, amount))
        await asyncio.sleep(0)
        return {"refunded": amount}

    assert {"refunded": 4900} == asyncio.run(refund("payment_1", amount=4900))
    assert [("payment_1", 4900)] == calls
    [request] = provider.requests()
    assert {"payment_id": "payment_1", "amount": 4900} == request.arguments
    execution = guard.ledger.get(request.id)
    assert execution is not None
    assert "finished" == execution.state


@pytest.mark.parametrize(
    ("policy", "reason", "note"),
    [
        pytest.param(
            deny_after(0.05, "not this customer"),
            ag.Reason.DENIED,
            "not this customer",
            id="denied",
        ),
        # The expiry is checked last, right before the call.
        pytest.param(
            approve_after(0.05, valid_for=-60), ag.Reason.APPROVAL_EXPIRED, None, id="expired"
        ),
    ],
)
def test_unapproved_async_call_returns_not_run(
    provider: LocalProvider,
    guard: ag.Guard,
    policy: Policy,
    reason: ag.Reason,
    note: str | None,
) -> None:
    """A denied or already-expired approval does not run the async tool: NotRun with its reason."""
    provider.policy = policy
    ran: list[str] = []
    result = asyncio.run(_refund_tool(guard, ran)("payment_1"))
    assert isinstance(result, ag.NotRun)
    assert reason == result.reason
    assert note == result.note
    assert [] == ran


def test_async_call_survives_a_failed_create_and_a_dropped_poll(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """A 503 on create and a dropped poll are retried; one request is created and it runs."""
    provider.faults.add("status", on="create", status=503)
    provider.faults.add("drop_after_commit", on="poll")
    provider.policy = approve_after(0.3)
    assert "refunded payment_1" == asyncio.run(_refund_tool(guard, [])("payment_1"))
    assert [("status", "create"), ("drop_after_commit", "poll")] == [
        (fault.kind, fault.exchange) for fault in provider.faults.log
    ]
    assert 1 == provider.stats.created
    assert 2 == provider.stats.creates
    assert provider.stats.polls >= 2


def test_async_call_gives_up_at_the_harness_limit(provider: LocalProvider, guard: ag.Guard) -> None:
    """With nobody deciding, the wait ends at the harness's limit: NOT_OBTAINED, not denied."""
    refund = _refund_tool(guard, [])

    async def main() -> Any:
        with ag.harness_call(limit="4s"):
            return await refund("payment_1")

    start = time.monotonic()
    result = asyncio.run(main())
    assert time.monotonic() - start < 6
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == result.reason
    [request] = provider.requests()
    assert "2s" == request.timeout  # 4s less the test guard's two 1s margins
    assert "pending" != provider.get(request.id).status


def test_cancelling_the_task_cancels_the_request(provider: LocalProvider, guard: ag.Guard) -> None:
    """Cancelling the awaiting task cancels the pending request and CancelledError propagates."""
    ran: list[str] = []

    async def main() -> tuple[ApprovalRequest, float]:
        call = _refund_tool(guard, ran)("payment_1")
        return await _cancel_when(call, _first_polled_request(provider))

    request, cancelled_at = asyncio.run(main())
    waited = _wait_for_status(provider, request.id, CANCELLED, within=2.0)
    assert waited is not None
    assert time.monotonic() - cancelled_at < 1.5
    assert [] == ran
    assert 1 == provider.stats.cancels


def test_cancelling_during_the_create_still_cancels_the_request(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """A cancel that lands while the create is in flight cancels the request it made."""
    provider.faults.add("delay", on="create", delay=0.5)

    async def main() -> None:
        # Cancelled once the create has reached the provider.
        reached = _until(lambda: provider.faults.log)
        await _cancel_when(_refund_tool(guard, [])("payment_1"), reached)

    asyncio.run(main())

    def only_request_cancelled() -> bool:
        return [CANCELLED] == [request.status for request in provider.requests()]

    # The create's late answer is what names the request to withdraw: after CancelledError.
    assert _eventually(only_request_cancelled, within=3.0) is not None
    assert 0 == provider.stats.polls


def test_harness_call_applies_inside_async_code(provider: LocalProvider, guard: ag.Guard) -> None:
    """harness_call's key and limit reach the provider from an async tool."""
    provider.policy = approve_after(0.05)
    refund = _refund_tool(guard, [], timeout="30m")

    async def main() -> Any:
        with ag.harness_call(idempotency_key="toolcall_async_1", limit="90s"):
            return await refund("payment_1")

    assert "refunded payment_1" == asyncio.run(main())
    assert {"toolcall_async_1": "1m28s"} == _keys_and_timeouts(provider)


def test_concurrent_tasks_do_not_see_each_others_harness_call(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """Two tasks inside their own harness_call at once each send their own key and limit."""
    provider.policy = approve_after(0.2)
    refund = _refund_tool(guard, [], timeout="30m")

    async def main() -> tuple[Any, ...]:
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

    assert ["refunded payment_a", "refunded payment_b"] == list(asyncio.run(main()))
    assert {"toolcall_a": "58s", "toolcall_b": "1m28s"} == _keys_and_timeouts(provider)
    by_key = {request.arguments["payment_id"]: request.timeout for request in provider.requests()}
    assert {"payment_a": "58s", "payment_b": "1m28s"} == by_key


def test_abandon_event_abandons_an_async_call(provider: LocalProvider, guard: ag.Guard) -> None:
    """harness_call(abandon=event) in async: NotRun(CANCELLED) and the request is cancelled."""
    abandon = threading.Event()
    ran: list[str] = []

    async def main() -> tuple[Any, str, float]:
        with ag.harness_call(abandon=abandon):
            task = asyncio.create_task(_refund_tool(guard, ran)("payment_1"))
        request = await _first_polled_request(provider)
        abandon.set()
        set_at = time.monotonic()
        return await task, request.id, set_at

    result, request_id, set_at = asyncio.run(main())
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.CANCELLED == result.reason
    assert _wait_for_status(provider, request_id, CANCELLED, within=2.0) is not None
    assert time.monotonic() - set_at < 1.5
    assert [] == ran


def test_fifty_concurrent_async_calls_each_run_once(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """Fifty guarded calls on one loop, all approved: each runs exactly once."""
    provider.policy = approve_after(0.05)
    ran: list[str] = []
    refund = _refund_tool(guard, ran)
    payment_ids = [f"payment_{n}" for n in range(50)]

    async def main() -> list[Any]:
        return await asyncio.gather(*(refund(payment_id) for payment_id in payment_ids))

    assert [f"refunded {payment_id}" for payment_id in payment_ids] == asyncio.run(main())
    assert {payment_id: 1 for payment_id in payment_ids} == collections.Counter(ran)
    assert 50 == provider.stats.created


def test_cancelling_during_the_claim_gives_the_claim_back(
    provider: LocalProvider,
) -> None:
    """A cancel that lands while the record is claimed: the tool does not run, nor count as run."""
    claiming = threading.Event()
    cancelling = threading.Event()

    class SlowLedger(ag.MemoryLedger):
        def claim(
            self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
        ) -> bool:
            claiming.set()
            cancelling.wait(10)  # the claim is still under way when the cancel lands
            return super().claim(
                request_id, tool=tool, worker=worker, arguments_digest=arguments_digest
            )

    ledger = SlowLedger()
    guard = ag.Guard(base_url=provider.url, credential=provider.credential, ledger=ledger)
    provider.policy = approve_after(0.0)
    ran: list[str] = []

    async def claimed() -> None:
        await _until(claiming.is_set)
        # _cancel_when cancels as soon as this returns, before the loop runs again:
        # the claim's answer can only come back after the cancel.
        cancelling.set()

    asyncio.run(_cancel_when(_refund_tool(guard, ran)("payment_1"), claimed()))
    assert [] == ran
    assert [] == ledger.recent()  # released: a retry with the same key may still run it
