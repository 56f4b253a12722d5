"""5. The local provider alone: waiting long polls answered by a burst of decisions; creates/s."""

from __future__ import annotations

import threading
import time
from typing import Any

from ._common import ChildProvider, Result, ms, percentile, raise_fd_limit
from ._reference import BareClient


def _waiting_polls(child: ChildProvider, n: int) -> dict[str, Any]:
    setup = BareClient(child.url, child.credential)
    ids = [setup.create("bench_provider", {"n": k}) for k in range(n)]
    setup.close()
    answered: dict[str, float] = {}
    statuses: dict[str, str] = {}

    def wait(request_id: str) -> None:
        client = BareClient(child.url, child.credential)
        body = client.long_poll(request_id, wait=60)
        answered[request_id] = time.perf_counter()
        statuses[request_id] = str(body.get("status"))
        client.close()

    threads = [threading.Thread(target=wait, args=(request_id,)) for request_id in ids]
    for thread in threads:
        thread.start()
    if not child.call("wait_polls", n, 120):
        raise RuntimeError("not every poll reached the provider")
    time.sleep(0.3)
    decided = child.call("approve_pending", "5m")
    for thread in threads:
        thread.join(70)
    if sorted(statuses.values()) != ["approved"] * n:
        raise RuntimeError("a waiting poll did not come back approved")
    first = min(at for at, _ in decided.values())
    last_decision = max(at for at, _ in decided.values())
    lags = [answered[request_id] - decided[request_id][0] for request_id in ids]
    return {
        "all_answered": max(answered.values()) - first,
        "burst": last_decision - first,
        "lags": lags,
    }


def _create_throughput(child: ChildProvider, total: int, workers: int) -> float:
    per_worker = total // workers
    barrier = threading.Barrier(workers + 1)

    def work(w: int) -> None:
        client = BareClient(child.url, child.credential)
        client.create("bench_warm", {"w": w})  # connect before the clock starts
        barrier.wait()
        for k in range(per_worker):
            client.create("bench_create", {"w": w, "k": k})
        client.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join(300)
    return per_worker * workers / (time.perf_counter() - start)


def run(quick: bool = False) -> Result:
    n = 20 if quick else 500
    creates = 40 if quick else 2000
    result = Result("provider_alone", f"5. The local provider alone ({n} waiting polls)")
    raise_fd_limit(max(4096, 4 * n + 256))
    with ChildProvider() as child:
        polls = _waiting_polls(child, n)
        single = _create_throughput(child, creates // 4, 1)
        parallel = _create_throughput(child, creates, 8)
    lags = polls["lags"]
    result.add(
        f"all {n} waiting polls answered",
        ms(polls["all_answered"]),
        f"the decision burst itself took {ms(polls['burst'])}",
        "",
    )
    result.add(
        "per poll: its decision -> its answer parsed",
        f"p50 {ms(percentile(lags, 50))}",
        f"p99 {ms(percentile(lags, 99))}, max {ms(max(lags))}",
    )
    result.add("create throughput, 1 client", f"{single:,.0f} req/s", "keep-alive, sequential")
    result.add("create throughput, 8 clients", f"{parallel:,.0f} req/s", "keep-alive, concurrent")
    result.figures = {
        "waiting_polls": n,
        "all_answered_seconds": polls["all_answered"],
        "burst_seconds": polls["burst"],
        "lag_seconds": {"p50": percentile(lags, 50), "p99": percentile(lags, 99), "max": max(lags)},
        "creates_per_second": {"1": single, "8": parallel},
    }
    result.notes.append(
        "the provider (stdlib ThreadingHTTPServer, SQLite in memory) runs in its own process; "
        "decisions are recorded one after another through the store, as a reviewer burst would "
        "be, and each waiting poll is woken by its own event"
    )
    return result
