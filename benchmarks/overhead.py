"""3. The guard's own cost with the network removed: a 5-argument call, guarded vs bare."""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import approval_guard as ag
from approval_guard._codec.clock import ClockSample, SystemClock
from approval_guard._transport import threads as _threads
from approval_guard._transport.answer import Answer
from approval_guard._transport.exchange import ExchangeSpec

from ._common import Result, median

GOAL_US = 50.0


class InstantApprover:
    """Stands in for ProviderClient: every create comes back approved, in-process.

    It keeps the real client's ``perform`` and returns real ``Answer`` objects
    with a ``Date`` sample, so the guard runs every check it runs on the wire.
    Its own work (a counter, a dict copy) is included in the guarded figure.
    Like the real client with a provider named by its IP address, it performs
    an exchange on the calling thread when nothing can abandon it (``here``);
    ``handing_off`` makes it refuse, to measure the helper-thread hand-off.
    """

    def __init__(self, clock: SystemClock) -> None:
        self._clock = clock
        self._ids = itertools.count()
        self._parsed: dict[bytes, dict[str, Any]] = {}
        self.handing_off = False

    def here(self, spec: ExchangeSpec) -> Callable[[ExchangeSpec], Answer] | None:
        return None if self.handing_off else self.perform

    def perform(self, spec: ExchangeSpec) -> Answer:
        if spec.method != "POST" or spec.path != "/v1/requests":
            raise AssertionError("an approved create needs no poll and no cancel")
        body = spec.body or b""
        sent = self._clock.monotonic()
        fields = self._parsed.get(body)
        if fields is None:
            obj = json.loads(body)
            now = "2026-09-16T12:00:00Z"
            fields = {
                "tool": obj["tool"],
                "arguments": obj["arguments"],
                "timeout": obj["timeout"],
                "status": "approved",
                "created_at": now,
                "deadline_at": "2026-09-16T12:30:00Z",
                "decision": {
                    "status": "approved",
                    "note": None,
                    "decided_at": now,
                    "expires_at": "2026-09-16T12:05:00Z",
                },
            }
            self._parsed[body] = fields
        answer = {"id": f"req-{next(self._ids)}", **fields}
        # The provider's clock reads 12:00:00 now, so the approval has 5 minutes left.
        date = _PROVIDER_NOW
        return Answer(
            status=201,
            body=answer,
            provider_request_id="x",
            sample=ClockSample(sent=sent, received=self._clock.monotonic(), date=date),
        )

    def close(self) -> None:
        pass


_PROVIDER_NOW = datetime(2026, 9, 16, 12, 0, 0, tzinfo=timezone.utc)


def refund(payment_id: str, amount: int, currency: str, reason: str, notify: bool) -> int:
    return amount


def make_guarded() -> tuple[Any, ag.Guard, InstantApprover]:
    guard = ag.Guard(base_url="http://127.0.0.1:9", credential="bench", harness_limit="35m")
    client = InstantApprover(SystemClock())
    guard._client = client  # type: ignore[assignment]
    return guard.requires_approval(timeout="30m")(refund), guard, client


@contextlib.contextmanager
def _a_new_thread_per_exchange() -> Iterator[None]:
    """The helper-thread start as it was before helpers were reused: a new thread each time."""

    def start(fn: Any, *, name: str, on_done: Any = None) -> _threads.Outcome:
        outcome = _threads.Outcome()

        def run() -> None:
            try:
                outcome.value = fn()
            except BaseException as exc:
                outcome.error = exc
            finally:
                outcome.done.set()
                if on_done is not None:
                    on_done()

        threading.Thread(target=run, name=name, daemon=True).start()
        return outcome

    reused = _threads.start
    _threads.start = start
    try:
        yield
    finally:
        _threads.start = reused


def _time(fn: Any, n: int) -> float:
    args = ("payment_123", 4900, "GBP", "duplicate charge", True)
    gc.collect()
    start = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - start) / n


def run(quick: bool = False, profile: bool = False) -> Result:
    result = Result("overhead", "3. Guard overhead, network removed (5-argument call)")
    guarded, guard, client = make_guarded()
    check = guarded("payment_123", 4900, "GBP", "duplicate charge", True)
    if check != 4900:
        raise RuntimeError(f"the guarded call did not run: {check!r}")
    n = 300 if quick else 20_000
    repeats = 3 if quick else 7
    # A fresh ledger per repeat: it grows by one row per call.
    bare_times, guarded_times, handed_times, fresh_times = [], [], [], []
    for _ in range(repeats):
        guard._ledger = ag.MemoryLedger()
        bare_times.append(_time(refund, n))
        guarded_times.append(_time(guarded, n))
        # The create handed to a helper thread, as every exchange was before
        # exchanges nothing can abandon ran on the calling thread.
        client.handing_off = True
        guard._ledger = ag.MemoryLedger()
        handed_times.append(_time(guarded, n))
        guard._ledger = ag.MemoryLedger()
        with _a_new_thread_per_exchange():
            fresh_times.append(_time(guarded, n))
        client.handing_off = False
    # The least noisy estimate of a CPU-bound cost on a shared machine is the best repeat
    # (as timeit advises); the medians go to the JSON too.
    bare = min(bare_times)
    full = min(guarded_times)
    overhead_us = (full - bare) * 1e6
    result.add(
        "guard overhead per call",
        f"{overhead_us:.1f} µs",
        f"bare call {bare * 1e9:.0f} ns",
        f"< {GOAL_US:.0f} µs",
        overhead_us < GOAL_US,
    )
    result.add("guarded call, total", f"{full * 1e6:.1f} µs", f"bare {bare * 1e6:.2f} µs")
    handed_us = (min(handed_times) - bare) * 1e6
    result.add(
        "guard overhead, the create handed to a helper thread (before)",
        f"{handed_us:.1f} µs",
        f"on the calling thread {overhead_us:.1f} µs",
    )
    fresh_us = (min(fresh_times) - bare) * 1e6
    result.add(
        "guard overhead, a new helper thread per exchange (before reuse)",
        f"{fresh_us:.1f} µs",
        f"reused helpers {handed_us:.1f} µs",
    )
    result.figures = {
        "calls_per_repeat": n,
        "repeats": repeats,
        "bare_seconds_per_call": bare,
        "guarded_seconds_per_call": full,
        "overhead_us": overhead_us,
        "guarded_repeats_us": [t * 1e6 for t in guarded_times],
        "bare_repeats_ns": [t * 1e9 for t in bare_times],
        "overhead_median_us": (median(guarded_times) - median(bare_times)) * 1e6,
        "handed_off_overhead_us": handed_us,
        "handed_off_repeats_us": [t * 1e6 for t in handed_times],
        "fresh_thread_overhead_us": fresh_us,
    }
    result.notes.append(
        f"best of {repeats} repeats of {n} calls (median in the JSON); the in-process client "
        "answers every create 'approved' with a Date header, so binding, JSON, the echo "
        "check, the execution record and the expiry check all run; only HTTP is gone"
    )
    if profile:
        import cProfile
        import pstats

        guard._ledger = ag.MemoryLedger()
        prof = cProfile.Profile()
        prof.enable()
        _time(guarded, n)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return result
