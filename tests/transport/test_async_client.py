"""Async tools wait on the event loop itself: no thread per call, every deadline kept.

Against the real provider over 127.0.0.1 (the server directly, not the fault
proxy, whose thread per connection would blur the thread counts).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._transport.async_pool import KEEP_ALIVE
from approval_guard.testing import LocalProvider
from benchmarks._common import open_sockets as _open_sockets
from tests.support.api import eventually


def _eventually(check: Callable[[], bool], within: float) -> bool:
    return eventually(check, timeout=within)


def _direct_guard(provider: LocalProvider, **options: Any) -> ag.Guard:
    """A Guard on the server itself (no fault proxy in between)."""
    settings: dict[str, Any] = {
        "base_url": provider.server.url,
        "credential": provider.credential,
        "harness_limit": "2m",
        "ledger": ag.MemoryLedger(),
    }
    settings.update(options)
    return ag.Guard(**settings)


def _client_threads() -> list[str]:
    """This process's threads but the in-process provider's own worker pool."""
    return [t.name for t in threading.enumerate() if not t.name.startswith("AnyIO worker")]


def _approve_when_waiting(provider: LocalProvider, n: int) -> threading.Thread:
    def approve() -> None:
        assert provider.server.wait_for_waiting_polls(n, 60)
        for request in provider.requests():
            if request.status == "pending":
                provider.approve(request.id)

    thread = threading.Thread(target=approve, daemon=True)
    thread.start()
    return thread


def test_waiting_async_calls_hold_no_thread_each(provider: LocalProvider) -> None:
    """200 async calls waiting at once add a constant few threads, not one (or two) per call."""
    calls = 200
    guard = _direct_guard(provider)
    ran: list[int] = []

    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        ran.append(n)
        return n

    seen: dict[str, list[str]] = {}

    async def main() -> list[Any]:
        await tool(-1)  # warm: the client, the resolver's executor
        seen["before"] = _client_threads()
        tasks = [asyncio.ensure_future(tool(n)) for n in range(calls)]
        # Every call's poll is held at the provider: whatever a call waits with is there now.
        while provider.server.waiting_polls < calls:
            await asyncio.sleep(0.02)
        seen["waiting"] = _client_threads()
        for request in provider.requests():
            if request.status == "pending":
                await asyncio.to_thread(provider.approve, request.id)
        return await asyncio.gather(*tasks)

    approver = _approve_when_waiting(provider, 1)  # the warm-up call
    results = asyncio.run(main())
    approver.join(10)
    assert list(range(calls)) == results
    assert sorted(ran) == [-1, *range(calls)]
    # The loop's default executor (name lookups, the execution record) is bounded: a
    # constant, whatever the number of calls. A thread per waiting call would add 200.
    assert len(seen["waiting"]) - len(seen["before"]) <= 8, seen["waiting"]
    # No helper thread of ours is at work (earlier tests in this process may have left idle ones).
    ours = [name for name in seen["waiting"] if name.startswith("approval_guard")]
    # The exchange watchdog is one thread for the whole process, not one per call.
    idle = {"approval_guard-idle", "approval_guard-watchdog"}
    assert not [name for name in ours if name not in idle], ours
    assert ours.count("approval_guard-idle") <= seen["before"].count("approval_guard-idle"), seen
    assert ours.count("approval_guard-watchdog") <= 1, ours
    guard.close()


def test_a_cancelled_long_poll_closes_its_connection_at_once(provider: LocalProvider) -> None:
    """Cancelling the task mid long-poll ends the poll at the provider within a second."""
    guard = _direct_guard(provider)

    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        return n

    async def main() -> float:
        task = asyncio.ensure_future(tool(1))
        while provider.server.waiting_polls < 1:
            await asyncio.sleep(0.01)
        cancelled = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return cancelled

    cancelled = asyncio.run(main())
    assert _eventually(lambda: provider.server.waiting_polls == 0, 1.0)
    assert time.monotonic() - cancelled < 1.5
    assert ["cancelled"] == [r.status for r in provider.requests()]


def test_an_abandoned_async_call_stops_its_poll_within_a_second(provider: LocalProvider) -> None:
    """The harness's abandon event ends an async wait mid long-poll, and the request."""
    guard = _direct_guard(provider)
    gone = threading.Event()

    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        return n

    async def main() -> Any:
        with ag.harness_call(abandon=gone):
            return await tool(1)

    def abandon_when_waiting() -> None:
        provider.server.wait_for_waiting_polls(1, 10)
        gone.set()

    threading.Thread(target=abandon_when_waiting, daemon=True).start()
    out = asyncio.run(main())
    set_at = time.monotonic()
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert _eventually(lambda: provider.server.waiting_polls == 0, 1.0)
    assert time.monotonic() - set_at < 1.5
    assert ["cancelled"] == [r.status for r in provider.requests()]


def _run_calls(guard: ag.Guard, provider: LocalProvider, calls: int, *, aclose: bool) -> None:
    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        return n

    async def main() -> None:
        approver = _approve_when_waiting(provider, calls)
        assert list(range(calls)) == await asyncio.gather(*(tool(n) for n in range(calls)))
        approver.join(10)
        if aclose:
            await guard.aclose()

    asyncio.run(main())


def test_aclose_releases_every_socket(provider: LocalProvider) -> None:
    """``await guard.aclose()`` closes the loop's pooled connections."""
    before = _open_sockets()
    guard = _direct_guard(provider)
    _run_calls(guard, provider, 20, aclose=True)
    assert _eventually(lambda: _open_sockets() <= before, 5.0), (before, _open_sockets())


@pytest.mark.slow
def test_close_after_the_loop_ended_releases_every_socket(provider: LocalProvider) -> None:
    """``guard.close()`` after ``asyncio.run`` returned: that loop's sockets are closed too."""
    before = _open_sockets()
    guard = _direct_guard(provider)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        _run_calls(guard, provider, 20, aclose=False)
        # The loop closed its own clients as it ended (loop.shutdown_asyncgens), cleanly.
        assert _eventually(lambda: _open_sockets() <= before, 5.0), (before, _open_sockets())
        guard.close()
        gc.collect()
    assert _open_sockets() <= before


def test_close_from_another_thread_closes_a_running_loops_client(
    provider: LocalProvider,
) -> None:
    """A loop running in another thread: close() has that loop close its own client."""
    guard = _direct_guard(provider)
    loop = asyncio.new_event_loop()
    before = _open_sockets()  # with the loop's own wake-up socket pair
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        return n

    approver = _approve_when_waiting(provider, 1)
    assert 1 == asyncio.run_coroutine_threadsafe(tool(1), loop).result(20)
    approver.join(10)
    guard.close()
    assert _eventually(lambda: _open_sockets() <= before, 5.0), (before, _open_sockets())
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_idle_connections_kept_are_bounded(provider: LocalProvider) -> None:
    """After more calls than the pool keeps, at most 64 idle connections stay open."""
    calls = KEEP_ALIVE + 26
    guard = _direct_guard(provider)

    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        return n

    async def main() -> int:
        before = _open_sockets()  # with the loop's own wake-up socket pair
        approver = _approve_when_waiting(provider, calls)
        await asyncio.gather(*(tool(n) for n in range(calls)))
        approver.join(10)
        # Client sockets kept, as this loop sees them (server-side ones close with theirs):
        # those beyond the kept ones close once their calls are done.
        deadline = time.monotonic() + 10
        while _open_sockets() - before > 2 * KEEP_ALIVE and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return _open_sockets() - before

    kept = asyncio.run(main())
    # Each kept connection is two sockets here (the server runs in this process too).
    assert kept <= 2 * KEEP_ALIVE, kept
    guard.close()


def test_without_httpx_async_tools_still_run_in_threads(
    provider: LocalProvider, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No ``async`` extra: the same rules, each exchange in a helper thread, and a warning."""
    monkeypatch.setitem(sys.modules, "approval_guard._transport.async_client", None)
    guard = _direct_guard(provider)

    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        return n

    approver = _approve_when_waiting(provider, 1)
    with caplog.at_level(logging.WARNING, logger="approval_guard"):
        assert 7 == asyncio.run(tool(7))
    approver.join(10)
    assert any("httpx is not installed" in r.getMessage() for r in caplog.records)
    assert guard._aclient is None
    guard.close()


def test_aclose_never_stalls_its_loop_behind_another_busy_loop(provider: LocalProvider) -> None:
    """A Guard used on a loop in another thread: ``await aclose()`` here keeps this loop running."""
    guard = _direct_guard(provider)
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()

    @guard.requires_approval(timeout="1m")
    async def tool(n: int) -> int:
        return n

    approver = _approve_when_waiting(provider, 1)
    assert 1 == asyncio.run_coroutine_threadsafe(tool(1), other).result(20)
    approver.join(10)
    other.call_soon_threadsafe(time.sleep, 1.5)  # the other loop is busy for a while

    async def main() -> float:
        stalls: list[float] = []

        async def tick() -> None:
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                stalls.append(now - last)
                last = now

        ticker = asyncio.ensure_future(tick())
        await asyncio.sleep(0.05)
        await guard.aclose()
        ticker.cancel()
        return max(stalls)

    assert asyncio.run(main()) < 0.5
    other.call_soon_threadsafe(other.stop)
    thread.join(5)
    other.close()
