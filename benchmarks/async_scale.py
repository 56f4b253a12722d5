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
import concurrent.futures
import gc
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import approval_guard as ag
from approval_guard.testing import LocalProvider

from ._common import (
    Result,
    log,
    ms,
    open_sockets,
    percentile,
    raise_fd_limit,
    rss_bytes,
)
from ._reference import BareClient
from ._served import REVIEWERS, Served, View
from .latency import _floor_sample

KIB = 1024
#: Calls are started in waves of this many (AG_BENCH_ASYNC_WAVE); by default all at once
#: (an event loop sends 64 creates at a time, each timed from when it is sent).
WAVE = int(os.environ.get("AG_BENCH_ASYNC_WAVE", "100000"))
SETTLE = 0.005
#: Long polls held 60 s (the provider's cap), so none is re-sent while the run lasts.
POLL_WAIT = "60s"


def _almost(n: int) -> int:
    """Waiting polls to wait for: a call between two polls is not waiting at that instant."""
    return n - n // 200


def _snapshot() -> dict[str, int]:
    gc.collect()
    return {"threads": threading.active_count(), "rss": rss_bytes(), "sockets": open_sockets()}


def _lags(
    decided: dict[str, tuple[float, float, int]], ns: dict[str, int], starts: dict[int, float]
) -> list[float]:
    """Decision (the approval's request sent) -> tool start, for each call approved."""
    return [
        starts[ns[rid]] - sent
        for rid, (sent, _, code) in decided.items()
        if code == 200 and ns.get(rid, -1) in starts
    ]


def _async_many(served: View, calls: int, *, batched: bool = True) -> dict[str, Any]:
    guard = ag.Guard(
        base_url=served.url, credential=served.credential, harness_limit="35m", poll_wait=POLL_WAIT
    )
    if not batched:
        # The comparison only: this client polls each call alone, as before API 1.2.
        guard._async_transport()
        assert guard._aclient is not None
        guard._aclient._batching.ok = False
    starts: dict[int, float] = {}

    @guard.requires_approval(timeout="30m")
    async def bench_async_scale(n: int) -> int:
        starts[n] = time.perf_counter()
        return n

    async def approve_pending() -> tuple[dict[str, tuple[float, float, int]], dict[str, int]]:
        ns = await asyncio.to_thread(served.pending)
        return await asyncio.to_thread(served.approve, list(ns)), ns

    async def main() -> dict[str, Any]:
        warm = asyncio.ensure_future(bench_async_scale(-1))
        await asyncio.to_thread(served.wait_pending, 1, 30)
        await asyncio.sleep(0.5)
        await approve_pending()
        await warm
        await asyncio.sleep(0.2)
        before = _snapshot()
        tasks: list[asyncio.Future[int]] = []
        started = time.perf_counter()
        for start in range(0, calls, WAVE):
            tasks += [
                asyncio.ensure_future(bench_async_scale(n))
                for n in range(start, min(calls, start + WAVE))
            ]
            if not await asyncio.to_thread(served.wait_pending, len(tasks), 180):
                log(f"async_scale: the provider held fewer than {len(tasks)} requests; stopping")
                break
        await asyncio.to_thread(served.settle)
        ramp = time.perf_counter() - started
        await asyncio.sleep(1.0)  # let every poll settle into its wait
        waiting = _snapshot()
        decided, ns = await approve_pending()
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
            "ns": ns,
            "ramp": ramp,
            "started": len(tasks),
            "ran": sum(1 for n, r in enumerate(results) if n == r),
        }

    out = asyncio.run(main())
    out["lags"] = _lags(out["decided"], out["ns"], starts)
    return out


def _sync_many(served: View, calls: int) -> dict[str, Any]:
    guard = ag.Guard(
        base_url=served.url, credential=served.credential, harness_limit="35m", poll_wait=POLL_WAIT
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
    served.wait_pending(1, 30)
    time.sleep(0.5)
    served.approve(list(served.pending()))
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
        if not served.wait_pending(len(threads), 120):
            raise RuntimeError(f"not every sync call made its request ({len(threads)})")
    served.settle()
    time.sleep(1.0)
    waiting = _snapshot()
    ns = served.pending()
    decided = served.approve(list(ns))
    for thread in threads:
        thread.join(60)
    guard.close()
    return {
        "before": before,
        "waiting": waiting,
        "decided": decided,
        "ran": sum(1 for n in range(calls) if outcomes.get(n) == n),
        "lags": _lags(decided, ns, starts),
    }


def _apart(fn: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``fn(*args)`` in a new process: each run's memory and threads measured from a clean start."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=3600)


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
    single_calls = 0 if quick else int(os.environ.get("AG_BENCH_ASYNC_SINGLE", "0"))
    result = Result("async_scale", f"8. {calls:,} async guarded calls waiting in one process")
    raise_fd_limit(2 * max(calls, sync_calls, single_calls) + 1024)
    single = None
    with Served() as served:
        log(f"async_scale: {calls} async calls")
        many = _apart(_async_many, served.view, calls)
    if single_calls:
        with Served() as served:
            log(f"async_scale: {single_calls} async calls, one long poll each")
            single = _apart(_async_many, served.view, single_calls, batched=False)
    with Served() as served:
        log(f"async_scale: {sync_calls} sync calls")
        sync = _apart(_sync_many, served.view, sync_calls)
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
    burst = [sent for sent, _, _ in many["decided"].values()]
    acked = [answered for _, answered, _ in many["decided"].values()]
    result.add(
        f"the burst: {len(burst):,} approvals over the reviewer API ({REVIEWERS} connections)",
        ms(max(acked) - min(burst)),
        f"{len(burst) / max(1e-9, max(acked) - min(burst)):,.0f} approvals/s",
    )
    result.add(
        f"the start: {calls:,} calls created and waiting",
        f"{calls:,} in {many['ramp']:.1f} s",
        "all at once" if WAVE >= calls else f"waves of {WAVE:,}",
    )
    if single is not None:
        n1 = single["started"]
        result.add(
            f"the same with one long poll per call ({n1:,} calls, as before API 1.2)",
            f"{(single['waiting']['rss'] - single['before']['rss']) / n1 / KIB:.1f} KiB a call, "
            f"slowest start {ms(max(single['lags'] or [0.0]))}",
            f"{(single['waiting']['sockets'] - single['before']['sockets']) / n1:.2f} sockets/call",
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
    start = (
        "all at once"
        if WAVE >= calls
        else f"in waves of {WAVE:,} (the next once the file holds every request so far)"
    )
    result.notes.append(
        "the provider is `python -m approval_guard.provider.serving.process` (what "
        "`approval-guard serve` runs) on a SQLite file in its own process, so its threads, "
        f"sockets and memory are not counted; calls start {start}, their long polls (60 s) "
        "carried by batched waits (API 1.2); the burst is another process approving every "
        f"pending request over the reviewer API on {REVIEWERS} keep-alive connections; the "
        f"sync run holds {sync_calls:,} calls on threads, two each"
    )
    result.notes.append(
        "memory per call = (RSS with every call waiting - RSS before they started) / calls; "
        "a decision's time is when its approval request was sent; the "
        "latency rows interleave one async call (on a loop in another thread) with one bare "
        "requests long poll, each poll blocked before the decision"
    )
    return result
