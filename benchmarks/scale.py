"""4. Scale in one process: many guarded calls waiting at once, approved in one burst."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
from typing import Any

import approval_guard as ag

from ._common import ChildProvider, Result, ms, open_sockets, percentile, raise_fd_limit, rss_bytes

KIB = 1024


def _one_run(child: ChildProvider, calls: int, *, trace: bool) -> dict[str, Any]:
    idle_sockets = open_sockets()
    guard = ag.Guard(base_url=child.url, credential=child.credential, harness_limit="35m")
    starts: dict[int, float] = {}
    outcomes: dict[int, Any] = {}

    @guard.requires_approval(timeout="30m")
    def bench_scale(n: int) -> int:
        starts[n] = time.perf_counter()
        return n

    def caller(n: int) -> None:  # the harness's thread for one tool call
        outcomes[n] = bench_scale(n)

    # Warm up: imports, the first session, the provider's first request.
    warm = threading.Thread(target=caller, args=(-1,))
    warm.start()
    child.call("wait_polls", 1, 30)
    child.call("approve_pending", "5m")
    warm.join(10)
    time.sleep(0.2)

    gc.collect()
    before = {
        "threads": threading.active_count(),
        "sockets": open_sockets(),
        "rss": rss_bytes(),
    }
    if trace:
        tracemalloc.start()
        heap_before = tracemalloc.get_traced_memory()[0]
    threads = [threading.Thread(target=caller, args=(n,), name=f"caller-{n}") for n in range(calls)]
    for thread in threads:
        thread.start()
    if not child.call("wait_polls", calls + 1 - 1, 120):
        raise RuntimeError("not every call reached its long poll")
    time.sleep(0.5)  # let every poll settle into its wait
    waiting = {
        "threads": threading.active_count(),
        "sockets": open_sockets(),
        "rss": rss_bytes(),
    }
    if trace:
        waiting["heap"] = tracemalloc.get_traced_memory()[0] - heap_before
    decided = child.call("approve_pending", "5m")
    for thread in threads:
        thread.join(60)
    if trace:
        tracemalloc.stop()
    time.sleep(0.2)
    after = {"threads": threading.active_count(), "sockets": open_sockets()}
    guard.close()
    closed = {"sockets": open_sockets() - idle_sockets}

    lags = []
    for at, arguments in decided.values():
        n = arguments["n"]
        if n >= 0:
            lags.append(starts[n] - at)
    ran = sum(1 for n in range(calls) if outcomes.get(n) == n)
    burst = max(at for at, _ in decided.values()) - min(at for at, _ in decided.values())
    return {
        "before": before,
        "waiting": waiting,
        "after": after,
        "closed": closed,
        "lags": lags,
        "ran": ran,
        "burst": burst,
    }


def run(quick: bool = False) -> Result:
    calls = 20 if quick else 500
    result = Result("scale", f"4. {calls} guarded calls waiting in one process")
    raise_fd_limit(max(4096, 4 * calls + 256))
    with ChildProvider() as child:
        plain = _one_run(child, calls, trace=False)
        traced = _one_run(child, calls, trace=True)

    lags = plain["lags"]
    if plain["ran"] != calls or len(lags) != calls:
        raise RuntimeError(f"only {plain['ran']} of {calls} tools ran")
    threads_delta = plain["waiting"]["threads"] - plain["before"]["threads"]
    per_call = threads_delta / calls
    sockets_waiting = plain["waiting"]["sockets"] - plain["before"]["sockets"]
    rss_per_call = (plain["waiting"]["rss"] - plain["before"]["rss"]) / calls
    heap_per_call = traced["waiting"]["heap"] / calls
    result.add(
        "slowest decision -> tool start",
        ms(max(lags)),
        f"p50 {ms(percentile(lags, 50))}, p99 {ms(percentile(lags, 99))}",
        "< 1 s",
        max(lags) < 1.0,
    )
    result.add(
        "approval burst (provider recording all decisions)",
        ms(plain["burst"]),
        "",
    )
    result.add(
        "threads per waiting call",
        f"{per_call:.2f}",
        "1 = the harness's calling thread alone",
        "caller + at most 1",
        per_call <= 2.0,
    )
    result.add(
        "open sockets while waiting, per call",
        f"{sockets_waiting / calls:.2f}",
        f"after all returned: {plain['after']['sockets'] - plain['before']['sockets']:+d}; "
        f"after Guard.close(): {plain['closed']['sockets']} left",
        "bounded",
        sockets_waiting <= calls + 8,
    )
    result.add(
        "memory per waiting call (RSS)",
        f"{rss_per_call / KIB:.0f} KiB",
        "includes the harness's own thread stack",
        "< 200 KiB",
        rss_per_call < 200 * KIB,
    )
    result.add(
        "memory per waiting call (Python heap, tracemalloc)",
        f"{heap_per_call / KIB:.0f} KiB",
        "",
        "< 200 KiB",
        heap_per_call < 200 * KIB,
    )
    result.figures = {
        "calls": calls,
        "lag_seconds": {
            "p50": percentile(lags, 50),
            "p99": percentile(lags, 99),
            "max": max(lags),
        },
        "burst_seconds": plain["burst"],
        "threads": {k: plain[k]["threads"] for k in ("before", "waiting", "after")},
        "sockets": {k: plain[k]["sockets"] for k in ("before", "waiting", "after", "closed")},
        "rss_bytes": {k: plain[k]["rss"] for k in ("before", "waiting")},
        "rss_per_call_bytes": rss_per_call,
        "heap_per_call_bytes": heap_per_call,
        "traced_run_lag_max_seconds": max(traced["lags"]) if traced["lags"] else None,
    }
    result.notes.append(
        "the provider runs in a child process, so its threads and sockets are not counted; each "
        "waiting call is one harness thread blocked in the guarded call plus the guard's one "
        "poll thread, holding one keep-alive connection (sessions are pooled, 64 kept after)"
    )
    result.notes.append(
        "decision times are taken in the provider's process just before each approve "
        "(perf_counter is CLOCK_MONOTONIC, shared across processes); the heap figure comes "
        "from a second, traced run"
    )
    return result
