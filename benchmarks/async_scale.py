"""8. Async tools without a thread per call: 10,000 guarded calls waiting in one process.

Two parts, each beside its reference in the same run:

- many calls waiting at once against the provider in a child process: async
  tools on one event loop, then as many sync tools on threads, for the ratio
  (threads, memory per waiting call, slowest decision -> start after a burst);
- decision -> start, one waiting call at a time, for an async tool against the
  bare long-poll floor (a plain ``requests`` GET), as table 1 does for sync.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from typing import Any

import approval_guard as ag
from approval_guard.testing import LocalProvider

from ._common import (
    ChildProvider,
    Result,
    log,
    ms,
    open_sockets,
    percentile,
    raise_fd_limit,
    rss_bytes,
)
from ._reference import BareClient
from .latency import _floor_sample

KIB = 1024
#: Calls are started in waves of this many (a burst of 10,000 creates at once would
#: outlast each create's own 10 s deadline on this provider: about 600 creates/s).
WAVE = 500
SETTLE = 0.005
#: Long polls held 60 s (the provider's cap), so none is re-sent while the run lasts.
POLL_WAIT = "60s"


def _almost(n: int) -> int:
    """Waiting polls to wait for: a call between two polls is not waiting at that instant."""
    return n - n // 200


def _snapshot() -> dict[str, int]:
    gc.collect()
    return {"threads": threading.active_count(), "rss": rss_bytes(), "sockets": open_sockets()}


def _lags(decided: dict[str, Any], starts: dict[int, float]) -> list[float]:
    lags = []
    for at, arguments in decided.values():
        n = arguments["n"]
        if n >= 0 and n in starts:
            lags.append(starts[n] - at)
    return lags


def _async_many(child: ChildProvider, calls: int) -> dict[str, Any]:
    guard = ag.Guard(
        base_url=child.url, credential=child.credential, harness_limit="35m", poll_wait=POLL_WAIT
    )
    starts: dict[int, float] = {}

    @guard.requires_approval(timeout="30m")
    async def bench_async_scale(n: int) -> int:
        starts[n] = time.perf_counter()
        return n

    async def ask(command: str, *args: Any, timeout: float = 600) -> Any:
        return await asyncio.to_thread(child.call, command, *args, timeout=timeout)

    async def main() -> dict[str, Any]:
        warm = asyncio.ensure_future(bench_async_scale(-1))
        await ask("wait_waiting", 1, 30)
        await ask("approve_pending", "5m")
        await warm
        await asyncio.sleep(0.2)
        before = _snapshot()
        tasks: list[asyncio.Future[int]] = []
        for start in range(0, calls, WAVE):
            tasks += [
                asyncio.ensure_future(bench_async_scale(n))
                for n in range(start, min(calls, start + WAVE))
            ]
            if not await ask("wait_waiting", _almost(len(tasks)), 180):
                # The provider fell behind: measure what it holds, and say so.
                log(f"async_scale: the provider held fewer than {len(tasks)} polls; stopping there")
                break
        await asyncio.sleep(1.0)  # let every poll settle into its wait
        waiting = _snapshot()
        decided = await ask("approve_pending", "5m")
        results = await asyncio.gather(*tasks)
        await asyncio.sleep(0.2)
        after = _snapshot()
        await guard.aclose()
        closed = open_sockets()
        return {
            "before": before,
            "waiting": waiting,
            "after": after,
            "closed": closed,
            "decided": decided,
            "started": len(tasks),
            "ran": sum(1 for n, r in enumerate(results) if n == r),
        }

    out = asyncio.run(main())
    out["lags"] = _lags(out["decided"], starts)
    return out


def _sync_many(child: ChildProvider, calls: int) -> dict[str, Any]:
    guard = ag.Guard(
        base_url=child.url, credential=child.credential, harness_limit="35m", poll_wait=POLL_WAIT
    )
    starts: dict[int, float] = {}
    outcomes: dict[int, Any] = {}

    @guard.requires_approval(timeout="30m")
    def bench_sync_scale(n: int) -> int:
        starts[n] = time.perf_counter()
        return n

    def caller(n: int) -> None:  # the harness's thread for one tool call
        outcomes[n] = bench_sync_scale(n)

    warm = threading.Thread(target=caller, args=(-1,))
    warm.start()
    child.call("wait_waiting", 1, 30)
    child.call("approve_pending", "5m")
    warm.join(10)
    time.sleep(0.2)
    before = _snapshot()
    threads: list[threading.Thread] = []
    for start in range(0, calls, WAVE):
        wave = [
            threading.Thread(target=caller, args=(n,), name=f"caller-{n}", daemon=True)
            for n in range(start, min(calls, start + WAVE))
        ]
        for thread in wave:
            thread.start()
        threads += wave
        if not child.call("wait_waiting", _almost(len(threads)), 120):
            raise RuntimeError(f"not every sync call reached its long poll ({len(threads)})")
    time.sleep(1.0)
    waiting = _snapshot()
    decided = child.call("approve_pending", "5m", timeout=600)
    for thread in threads:
        thread.join(60)
    guard.close()
    return {
        "before": before,
        "waiting": waiting,
        "decided": decided,
        "ran": sum(1 for n in range(calls) if outcomes.get(n) == n),
        "lags": _lags(decided, starts),
    }


def _latency(samples: int) -> tuple[list[float], list[float]]:
    """Decision -> start of an async tool, one at a time, interleaved with the bare floor."""
    starts: dict[int, float] = {}
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    with LocalProvider() as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential, harness_limit="35m")

        @guard.requires_approval(timeout="30m")
        async def bench_async_latency(n: int) -> None:
            starts[n] = time.perf_counter()  # the first thing the tool does

        bare = BareClient(provider.url, provider.credential)

        def guard_sample(n: int) -> float:
            future = asyncio.run_coroutine_threadsafe(bench_async_latency(n), loop)
            request = provider.next_request(timeout=10)
            if not provider.wait_for_polls(1, timeout=10):
                raise RuntimeError("the async guard never started a long poll")
            time.sleep(SETTLE)
            decided = time.perf_counter()
            provider.approve(request.id)
            future.result(10)
            return starts[n] - decided

        for n in range(-3, 0):
            guard_sample(n)
            _floor_sample(provider, bare, n)
        guarded: list[float] = []
        floor: list[float] = []
        for n in range(samples):
            if n % 2:
                floor.append(_floor_sample(provider, bare, n))
                guarded.append(guard_sample(n))
            else:
                guarded.append(guard_sample(n))
                floor.append(_floor_sample(provider, bare, n))
        bare.close()
        asyncio.run_coroutine_threadsafe(guard.aclose(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    runner.join(5)
    loop.close()
    return guarded, floor


def run(quick: bool = False) -> Result:
    # AG_BENCH_ASYNC_CALLS / AG_BENCH_SYNC_CALLS: another scale (the full one takes long here).
    calls = 100 if quick else int(os.environ.get("AG_BENCH_ASYNC_CALLS", "10000"))
    sync_calls = 50 if quick else int(os.environ.get("AG_BENCH_SYNC_CALLS", "2000"))
    samples = 10 if quick else 200
    result = Result("async_scale", f"8. {calls:,} async guarded calls waiting in one process")
    raise_fd_limit(2 * calls + 1024)
    with ChildProvider(direct=True, fds=2 * calls + 1024) as child:
        log(f"async_scale: {calls} async calls")
        many = _async_many(child, calls)
        log(f"async_scale: {sync_calls} sync calls")
        sync = _sync_many(child, sync_calls)
    log("async_scale: latency")
    guarded, floor = _latency(samples)

    asked = calls
    calls = many["started"]
    if many["ran"] != calls or len(many["lags"]) != calls:
        raise RuntimeError(f"only {many['ran']} of {calls} async tools ran")
    if calls != asked:
        result.title = f"8. {calls:,} async guarded calls waiting in one process ({asked:,} asked)"
    if sync["ran"] != sync_calls:
        raise RuntimeError(f"only {sync['ran']} of {sync_calls} sync tools ran")
    a_threads = many["waiting"]["threads"] - many["before"]["threads"]
    s_threads = sync["waiting"]["threads"] - sync["before"]["threads"]
    a_rss = (many["waiting"]["rss"] - many["before"]["rss"]) / calls
    s_rss = (sync["waiting"]["rss"] - sync["before"]["rss"]) / sync_calls
    a_lag, s_lag = max(many["lags"]), max(sync["lags"])
    result.add(
        "threads added while they wait",
        f"{a_threads} ({many['waiting']['threads']} in all)",
        f"sync, {sync_calls:,} calls: {s_threads:,} ({s_threads / sync_calls:.2f} per call)",
        "a constant",
        a_threads <= 16,
    )
    result.add(
        "memory per waiting call (RSS)",
        f"{a_rss / KIB:.1f} KiB",
        f"sync: {s_rss / KIB:.1f} KiB ({s_rss / a_rss:.1f}x)"
        if a_rss > 0
        else f"sync: {s_rss / KIB:.1f} KiB",
        "< 20 KiB",
        a_rss < 20 * KIB,
    )
    result.add(
        "slowest decision -> tool start after the burst",
        ms(a_lag),
        f"sync: {ms(s_lag)}",
        "< 1 s",
        a_lag < 1.0,
    )
    result.add(
        "decision -> start, p50 / p99 over all calls",
        f"{ms(percentile(many['lags'], 50))} / {ms(percentile(many['lags'], 99))}",
        f"sync: {ms(percentile(sync['lags'], 50))} / {ms(percentile(sync['lags'], 99))}",
    )
    burst = [at for at, _ in many["decided"].values()]
    result.add(
        f"the burst: {len(burst):,} approvals recorded by the provider",
        ms(max(burst) - min(burst)),
        "",
    )
    result.add(
        "open sockets while waiting, per call",
        f"{(many['waiting']['sockets'] - many['before']['sockets']) / calls:.2f}",
        f"after all returned: {many['after']['sockets'] - many['before']['sockets']:+d}; "
        f"after aclose(): {many['closed'] - many['before']['sockets']:+d}",
        "bounded",
        many["after"]["sockets"] - many["before"]["sockets"] <= 64
        and many["closed"] <= many["before"]["sockets"],
    )
    g50, f50 = percentile(guarded, 50), percentile(floor, 50)
    result.add(
        f"p50, decision -> async tool starts ({samples} approvals)",
        ms(g50),
        f"floor (bare long-poll) {ms(f50)}",
        "floor + 1 ms",
        g50 - f50 < 0.001,
    )
    result.add("p99", ms(percentile(guarded, 99)), f"floor {ms(percentile(floor, 99))}")
    result.figures = {
        "calls": calls,
        "sync_calls": sync_calls,
        "async": {k: many[k] for k in ("before", "waiting", "after")},
        "sync": {k: sync[k] for k in ("before", "waiting")},
        "async_lag_seconds": {
            "p50": percentile(many["lags"], 50),
            "p99": percentile(many["lags"], 99),
            "max": a_lag,
        },
        "sync_lag_seconds": {
            "p50": percentile(sync["lags"], 50),
            "p99": percentile(sync["lags"], 99),
            "max": s_lag,
        },
        "rss_per_call_bytes": {"async": a_rss, "sync": s_rss},
        "latency_seconds": {
            "async_p50": g50,
            "floor_p50": f50,
            "async_p99": percentile(guarded, 99),
            "floor_p99": percentile(floor, 99),
        },
    }
    result.notes.append(
        f"the provider (LocalProvider's server, reached directly, not through its fault proxy) "
        f"runs in a child process, so its threads, sockets and memory are not counted; calls "
        f"start in waves of {WAVE}, each holding one long poll (60 s); the burst is the child "
        f"approving every pending request one after another through its store, in the same "
        f"process as the server; the sync run holds {sync_calls:,} calls on threads, two each"
    )
    result.notes.append(
        "memory per call = (RSS with every call waiting - RSS before they started) / calls; "
        "decision times are taken in the provider's process just before each approve; the "
        "latency rows interleave one async call (on a loop in another thread) with one bare "
        "requests long poll, each poll blocked before the decision"
    )
    return result
