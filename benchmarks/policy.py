"""6. Approval policy's own cost: ``when=False`` against a bare call, redaction of five arguments.

Both with the network removed. ``when=False`` never reaches a provider; the
redacted call goes through the same in-process approver as benchmark 3, so
the figure is what redacting five values adds to a whole guarded call.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import approval_guard as ag
from approval_guard import _otel
from approval_guard._codec.clock import SystemClock

from ._common import Result, median
from .overhead import InstantApprover, refund

WHEN_GOAL_US = 10.0
REDACT_GOAL_US = 20.0
ARGS = ("payment_123", 4900, "GBP", "duplicate charge", True)
NAMES = ("payment_id", "amount", "currency", "reason", "notify")


class _NoOpenTelemetry:
    """A meta-path finder that makes ``opentelemetry`` unimportable (the extra not installed)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("blocked for the benchmark")
        return None


def _without_otel() -> Callable[[], None]:
    """Make the guard see no ``opentelemetry``; returns the undo."""
    blocker = _NoOpenTelemetry()
    saved = {k: v for k, v in sys.modules.items() if k.startswith("opentelemetry")}
    for name in saved:
        del sys.modules[name]
    sys.meta_path.insert(0, blocker)
    _otel._looked, _otel._trace, _otel._tracer = False, None, None

    def undo() -> None:
        sys.meta_path.remove(blocker)
        sys.modules.update(saved)
        _otel._looked, _otel._trace, _otel._tracer = False, None, None

    return undo


def _time(fn: Callable[..., Any], n: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for _ in range(n):
        fn(*ARGS)
    return (time.perf_counter() - start) / n


def _best(
    fns: dict[str, Callable[..., Any]], n: int, repeats: int, reset: Callable[[], None]
) -> dict[str, list[float]]:
    """Seconds per call of each function, ``repeats`` interleaved rounds of ``n`` calls."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        reset()
        for name, fn in fns.items():
            times[name].append(_time(fn, n))
    return times


def _planner(guard: ag.Guard, tool: Any) -> Callable[..., Any]:
    """Make one call's plan (its arguments, redacted or not, and the body), as a call does."""
    spec = tool.__approval_guard__

    def plan(*args: Any) -> Any:
        return guard._plan(spec, args, {}, spec.bind(args, {}))

    return plan


def _guard() -> ag.Guard:
    guard = ag.Guard(
        base_url="http://127.0.0.1:9",
        credential="bench",
        harness_limit="35m",
        redaction_key="benchmark-redaction-key",
        # Its own record: the process's one already holds benchmark 3's request ids.
        ledger=ag.MemoryLedger(),
    )
    guard._client = InstantApprover(SystemClock())  # type: ignore[assignment]
    return guard


def run(quick: bool = False) -> Result:
    result = Result("policy", "6. Approval policy overhead, network removed (5-argument call)")
    n = 300 if quick else 5_000
    repeats = 3 if quick else 9
    guard = _guard()
    skipped = guard.requires_approval(when=lambda args: False)(refund)
    plain = guard.requires_approval()(refund)
    redacted = guard.requires_approval(redact=NAMES)(refund)
    for fn in (skipped, plain, redacted):
        if fn(*ARGS) != 4900:
            raise RuntimeError(f"{fn.__name__} did not run")

    def reset() -> None:
        guard._ledger = ag.MemoryLedger()  # it grows by one row per approved call

    undo = _without_otel()
    try:
        no_otel = _best(
            {"bare": refund, "skipped": skipped, "plain": plain, "redacted": redacted},
            n,
            repeats,
            reset,
        )
    finally:
        undo()
    with_otel = _best({"bare": refund, "skipped": skipped}, n, repeats, reset)
    # Redaction happens while the call's plan (the body sent) is made: timed there, with
    # and without, as the difference of two whole calls is lost in their noise.
    plans = _best(
        {"plain": _planner(guard, plain), "redacted": _planner(guard, redacted)},
        n * 4,
        repeats,
        reset,
    )

    bare = min(no_otel["bare"])
    when_us = (min(no_otel["skipped"]) - bare) * 1e6
    when_otel_us = (min(with_otel["skipped"]) - min(with_otel["bare"])) * 1e6
    redact_us = (min(plans["redacted"]) - min(plans["plain"])) * 1e6
    whole_us = (min(no_otel["redacted"]) - min(no_otel["plain"])) * 1e6
    result.add(
        "when=False, above a bare call",
        f"{when_us:.1f} µs",
        f"bare call {bare * 1e9:.0f} ns",
        f"< {WHEN_GOAL_US:.0f} µs",
        when_us < WHEN_GOAL_US,
    )
    result.add(
        "when=False, opentelemetry-api installed (no SDK)",
        f"{when_otel_us:.1f} µs",
        "no span started: no tracer provider set",
        f"< {WHEN_GOAL_US:.0f} µs",
        when_otel_us < WHEN_GOAL_US,
    )
    result.add(
        "redacting 5 arguments (making the call's plan)",
        f"{redact_us:.1f} µs",
        f"plan unredacted {min(plans['plain']) * 1e6:.1f} µs",
        f"< {REDACT_GOAL_US:.0f} µs",
        redact_us < REDACT_GOAL_US,
    )
    result.add(
        "redacted guarded call, whole, above unredacted",
        f"{whole_us:.1f} µs",
        f"guarded call {min(no_otel['plain']) * 1e6:.1f} µs unredacted",
    )
    result.figures = {
        "calls_per_repeat": n,
        "repeats": repeats,
        "bare_seconds_per_call": bare,
        "when_false_us": when_us,
        "when_false_with_otel_api_us": when_otel_us,
        "redaction_5_args_us": redact_us,
        "redacted_whole_call_us": whole_us,
        "plan_repeats_us": {k: [t * 1e6 for t in v] for k, v in plans.items()},
        "no_otel_repeats_us": {k: [t * 1e6 for t in v] for k, v in no_otel.items()},
        "otel_repeats_us": {k: [t * 1e6 for t in v] for k, v in with_otel.items()},
        "when_false_median_us": (median(no_otel["skipped"]) - median(no_otel["bare"])) * 1e6,
        "redaction_median_us": (median(plans["redacted"]) - median(plans["plain"])) * 1e6,
    }
    result.notes.append(
        f"best of {repeats} interleaved repeats of {n} calls (medians in the JSON); rows 1, 3 "
        "and 4 with opentelemetry made unimportable, as without the otel extra; row 2 with "
        "opentelemetry-api and no SDK configured; the redacted call is benchmark 3's call with "
        "all five arguments redacted, against the same call unredacted: row 3 times only the "
        "making of the call's plan (where redaction happens), row 4 the whole call"
    )
    return result
