"""2. Requests per approval when the decision comes after T, beside fixed 3 s polling."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import approval_guard as ag
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.testing import LocalProvider

from ._common import Result
from ._reference import BareClient

FULL_T = (5, 60, 300)  # seconds, as the issue states them
FULL_POLL_WAIT = 30  # the Guard's default poll_wait
BASELINE_INTERVAL = 3.0


def _find(provider: LocalProvider, label: str, timeout: float = 10.0) -> ApprovalRequest:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for request in provider.requests(status="pending"):
            if request.arguments.get("label") == label:
                return request
        time.sleep(0.002)
    raise TimeoutError(f"no request for {label}")


def run(quick: bool = False, slow: bool = False) -> Result:
    """Scaled by default: poll_wait 1 s and T / 30 keep T/poll_wait exactly as at full scale."""
    scale = 1.0 if slow else 1 / 30
    poll_wait = round(FULL_POLL_WAIT * scale)
    interval = BASELINE_INTERVAL * scale
    t_values = FULL_T[:1] if quick else FULL_T
    repeats = 1 if quick else 3
    mode = "full length" if slow else "scaled 1/30"
    result = Result(
        "requests_per_approval", f"2. HTTP requests per approval, decision after T ({mode})"
    )
    counts: dict[str, dict[int, list[int]]] = {"guard": {}, "baseline": {}}
    with LocalProvider() as provider:
        guard = ag.Guard(
            base_url=provider.url,
            credential=provider.credential,
            harness_limit="2h",
            poll_wait=poll_wait,
        )

        @guard.requires_approval(timeout="1h")
        def bench_requests(label: str) -> str:
            return label

        outcomes: dict[str, Any] = {}

        def guarded(label: str) -> None:
            outcomes[label] = bench_requests(label)

        def baseline(label: str) -> None:
            client = BareClient(provider.url, provider.credential)
            request_id = client.create("bench_requests", {"label": label}, timeout="1h")
            body, _ = client.poll_every(request_id, interval)
            outcomes[label] = body["status"]
            client.close()

        def decide_after(label: str, seconds: float) -> None:
            request = _find(provider, label)
            time.sleep(seconds)
            provider.approve(request.id)
            ids[label] = request.id

        ids: dict[str, str] = {}
        provider.stats.reset()
        threads = []
        # Every scenario at once: each request's polls are counted by the provider itself.
        for full_t in t_values:
            for r in range(repeats):
                for who, target in (("guard", guarded), ("baseline", baseline)):
                    label = f"{who}-{full_t}-{r}"
                    threads.append(threading.Thread(target=target, args=(label,)))
                    threads.append(
                        threading.Thread(target=decide_after, args=(label, full_t * scale))
                    )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(FULL_T[-1] * scale + 120)
        for label, request_id in ids.items():
            who, full_t_text, _ = label.split("-")
            polls = provider.history(request_id).poll_count
            # One create each (no faults here), plus every GET the provider counted.
            counts[who].setdefault(int(full_t_text), []).append(1 + polls)
        stats = provider.stats.snapshot()
        guard.close()

    expected_creates = 2 * len(t_values) * repeats
    if stats["creates"] != expected_creates or stats["cancels"] != 0:
        raise RuntimeError(f"unexpected exchanges: {stats}")
    if (
        sum(sum(v) for c in counts.values() for v in c.values())
        != stats["creates"] + stats["polls"]
    ):
        raise RuntimeError(f"per-request counts disagree with the provider's totals: {stats}")
    if any(outcomes[label] not in (label, "approved") for label in outcomes):
        raise RuntimeError(f"a call did not end approved: {outcomes}")

    table: list[dict[str, Any]] = []
    for full_t in t_values:
        bound = 2 + math.ceil(full_t / FULL_POLL_WAIT)
        guard_max = max(counts["guard"][full_t])
        base_max = max(counts["baseline"][full_t])
        result.add(
            f"T = {full_t} s",
            f"{guard_max} requests",
            f"{base_max} requests (T/3 s = {full_t / BASELINE_INTERVAL:.1f} GETs + 1 create)",
            f"<= 2 + ceil(T/{FULL_POLL_WAIT} s) = {bound}",
            guard_max <= bound,
        )
        table.append(
            {
                "T_seconds": full_t,
                "T_run_seconds": full_t * scale,
                "guard_requests": counts["guard"][full_t],
                "baseline_requests": counts["baseline"][full_t],
                "bound": bound,
            }
        )
    result.figures = {
        "mode": mode,
        "scale": scale,
        "poll_wait_seconds": poll_wait,
        "baseline_interval_seconds": interval,
        "repeats": repeats,
        "provider_stats": stats,
        "by_T": table,
    }
    if not slow:
        result.notes.append(
            f"scaled: poll_wait {poll_wait} s for the default 30 s, T/30 "
            f"({', '.join(f'{t * scale:.2f} s' for t in t_values)}) "
            f"and the baseline's interval {interval:.1f} s for 3 s, so T/poll_wait and "
            "T/interval are those of the full-length case; `--slow` runs it at full length"
        )
    result.notes.append(
        f"requests = creates + GETs counted by the provider, worst of {repeats} per T "
        "(all run at once); the baseline's GETs are plain (wait=0) reads"
    )
    return result
