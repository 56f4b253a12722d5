"""What the fault proxy injects, and what it counts: :class:`Faults` and :class:`Stats`."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import attrs

logger = logging.getLogger("approval_guard.testing")

FAULT_KINDS = ("drop_after_commit", "reset_before", "status", "garbage", "delay", "headers")
#: What a fault can be aimed at; ``"any"`` matches every ``/v1`` exchange.
EXCHANGES = ("create", "poll", "cancel", "decision", "list", "history", "events", "any")
STATUS_ERROR_TYPES = {
    429: "rate_limited",
    500: "internal_error",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


@attrs.frozen
class Fault:
    """One queued fault (see :meth:`Faults.add`).

    Attributes:
        kind: The fault's kind (see :class:`Faults`).
        on: The exchange it hits (``"create"``, ``"poll"``, ``"cancel"``, ``"any"``, ...).
        status: The status a ``status`` fault answers.
        retry_after: The ``Retry-After`` it sends, if any.
        delay: Seconds a ``delay`` fault holds the exchange.
        headers: Extra headers of the answer it makes.
    """

    kind: str
    on: str
    status: int
    retry_after: float | str | None
    delay: float
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class FaultRecord:
    """A fault that was injected: what it was and which exchange it hit.

    Attributes:
        kind: The fault's kind.
        exchange: The exchange it hit.
        path: The request path.
        status: The status it answered (a ``status`` fault); else None.
        at: ``time.monotonic()`` when it was injected.
    """

    kind: str
    exchange: str
    path: str
    status: int | None
    at: float  # time.monotonic() when injected


class Faults:
    """Deterministic fault injection, for tests of code that talks to the provider.

    Faults are matched in the order they were added (first match wins) and each
    is used ``times`` times, then dropped::

        provider.faults.add("drop_after_commit", on="create")
        provider.faults.add("status", on="poll", status=429, retry_after=1, times=2)
        provider.faults.add("delay", on="poll", delay=3.0)

    Kinds:

    ``"drop_after_commit"``
        forward the request (a create is committed), read the whole answer,
        then close the connection without passing it on.
    ``"reset_before"``
        reset the connection (a TCP RST) before forwarding anything.
    ``"status"``
        answer ``status`` (429 or 5xx) with an error body, and ``Retry-After``
        if ``retry_after`` is given, without forwarding anything.
    ``"garbage"``
        forward the request (a create is committed), then answer 200 with a
        body that is not JSON.
    ``"delay"``
        wait ``delay`` seconds, then forward and answer normally. A request
        with a body has its head forwarded first and its body after the wait,
        so a create holds its ``Idempotency-Key`` at the provider meanwhile.
    ``"headers"``
        forward and pass the answer on with ``headers`` added (a ``Date``
        given there replaces the provider's own): hostile or stale
        ``Date`` and ``Retry-After`` values, for instance.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[list[Any]] = []  # [Fault, remaining uses]
        self._log: list[FaultRecord] = []

    def add(
        self,
        kind: str,
        *,
        on: str = "any",
        times: int = 1,
        status: int = 503,
        retry_after: float | str | None = None,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue a fault for the next ``times`` exchanges of kind ``on``.

        Args:
            kind: The fault's kind (see above).
            on: The exchange to hit (``"any"``: the next of any kind).
            times: How many exchanges it hits before it is dropped.
            status: What a ``status`` fault answers: 429 or 5xx.
            retry_after: The ``Retry-After`` to send (seconds or an HTTP date), if any.
            delay: Seconds a ``delay`` fault holds the exchange.
            headers: Extra headers for the answer it makes.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, not {kind!r}")
        if on not in EXCHANGES:
            raise ValueError(f"'on' must be one of {EXCHANGES}, not {on!r}")
        if not isinstance(times, int) or times < 1:
            raise ValueError(f"times must be a positive integer, not {times!r}")
        if kind == "status" and status != 429 and not 500 <= status <= 599:
            raise ValueError(f"a status fault answers 429 or 5xx, not {status!r}")
        if delay < 0 or not math.isfinite(delay):
            raise ValueError(f"delay must be a non-negative number of seconds, not {delay!r}")
        pairs = tuple((headers or {}).items())
        if kind == "headers" and not pairs:
            raise ValueError("a headers fault needs headers={name: value, ...}")
        for name, value in pairs:
            if not (isinstance(name, str) and isinstance(value, str)) or any(
                ch in "\r\n" for ch in name + value
            ):
                raise ValueError(f"a fault header must be one line of text: {name!r}: {value!r}")
        fault = Fault(
            kind=kind, on=on, status=status, retry_after=retry_after, delay=delay, headers=pairs
        )
        with self._lock:
            self._queue.append([fault, times])

    def take(self, exchange: str, path: str = "") -> Fault | None:
        """Consume the first queued fault that matches ``exchange``, if any.

        Args:
            exchange: The exchange about to happen.
            path: Its request path (for the log).
        """
        with self._lock:
            for entry in self._queue:
                fault: Fault = entry[0]
                if fault.on in ("any", exchange):
                    entry[1] -= 1
                    if entry[1] == 0:
                        self._queue.remove(entry)
                    self._log.append(
                        FaultRecord(
                            kind=fault.kind,
                            exchange=exchange,
                            path=path,
                            status=fault.status if fault.kind == "status" else None,
                            at=time.monotonic(),
                        )
                    )
                    logger.info("injecting fault %s into %s %s", fault.kind, exchange, path)
                    return fault
        return None

    @property
    def log(self) -> list[FaultRecord]:
        """Every fault injected so far, in order."""
        with self._lock:
            return list(self._log)

    @property
    def pending(self) -> int:
        """How many fault uses are still queued."""
        with self._lock:
            return sum(entry[1] for entry in self._queue)

    def clear(self) -> None:
        """Drop every queued fault and the log."""
        with self._lock:
            self._queue.clear()
            self._log.clear()


class Stats:
    """Counts of exchanges received, for assertions like "exactly one create was sent".

    Attributes: ``creates``, ``polls``, ``cancels``, ``decisions``, ``lists``
    (requests received, faulted ones included), ``created`` (new requests
    made), ``replays`` (creates answered from an idempotency key).
    """

    _NAMES = ("creates", "polls", "cancels", "decisions", "lists", "created", "replays")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def incr(self, name: str) -> None:
        """Count one more of ``name``.

        Args:
            name: The counter.
        """
        with self._lock:
            self._counts[name] += 1

    def __getattr__(self, name: str) -> int:
        if name in Stats._NAMES:
            with self._lock:
                return self._counts[name]
        raise AttributeError(name)

    def snapshot(self) -> dict[str, int]:
        """All counters as a dict."""
        with self._lock:
            return {name: self._counts[name] for name in Stats._NAMES}

    def reset(self) -> None:
        """Set every counter to zero."""
        with self._lock:
            self._counts.clear()

    def __repr__(self) -> str:
        return f"Stats({self.snapshot()})"
