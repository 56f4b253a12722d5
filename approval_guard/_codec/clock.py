"""Time: the injected ``Clock``, on which every deadline (ours or the provider's) is measured.

Every local deadline is on the monotonic clock. The provider's timestamps are
on *its* clock, which may be minutes away from ours; we relate the two through
the ``Date`` header of each answer, conservatively (it has one-second
resolution and was written somewhere inside the round trip).
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Protocol

import attrs

from approval_guard._codec.now import utcnow

#: Added to every "is the approval still valid" judgement on top of the Date
#: header's one-second resolution and the round trip, for scheduling jitter.
EXPIRY_SAFETY = 0.25


class Clock(Protocol):
    """What the guard needs of time. Inject a fake one in tests; never sleep to test timing."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def now(self) -> datetime:
        """The wall time, timezone-aware UTC."""
        ...

    def sleep(self, seconds: float, abandon: threading.Event | None = None) -> bool:
        """Sleep up to ``seconds``; return True at once if ``abandon`` is (or becomes) set.

        Args:
            seconds: How long to sleep at most.
            abandon: An event that ends the sleep at once when set (None: sleep the whole time).
        """
        ...


class AsyncClock(Clock, Protocol):
    """A :class:`Clock` that can also sleep on an event loop; async tools use it when given.

    Optional, so that a sync-only ``Clock`` written before it keeps working: an
    async call on a clock without ``sleep_async`` sleeps on the event loop.
    """

    async def sleep_async(self, seconds: float) -> None:
        """Sleep ``seconds`` without blocking the running event loop."""
        ...


class SystemClock:
    """The real clocks: ``time.monotonic`` and the package's one ``utcnow()``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return utcnow()

    def sleep(self, seconds: float, abandon: threading.Event | None = None) -> bool:
        """Sleep up to ``seconds``; return True at once if ``abandon`` is (or becomes) set.

        Args:
            seconds: How long to sleep at most.
            abandon: An event that ends the sleep at once when set (None: sleep the whole time).
        """
        if abandon is not None:
            return abandon.wait(max(0.0, seconds))
        time.sleep(max(0.0, seconds))
        return False

    async def sleep_async(self, seconds: float) -> None:
        """Sleep ``seconds`` without blocking the running event loop.

        Args:
            seconds: How long to sleep.
        """
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"


async def sleep_async(clock: Clock, seconds: float) -> None:
    """Sleep on ``clock``'s own ``sleep_async``, or on the event loop's for a clock without one."""
    own = getattr(clock, "sleep_async", None)
    if own is None:
        await asyncio.sleep(max(0.0, seconds))
    else:
        await own(seconds)


# Dict-backed, as CallPlan is: one or two are made per answer read, and attrs fills a
# frozen instance's __dict__ faster than it sets slots one by one.
@attrs.frozen(slots=False)
class ClockSample:
    """When (on our monotonic clock) we sent a request, when its answer came, and its Date.

    ``floor`` is the latest provider timestamp the answer itself carried
    (``created_at``, ``decided_at``, ...): the provider's clock had reached it
    when the answer was written, whatever the Date header says. A Date below it
    lags (a cache, a lagging node) and must not make an approval look younger.
    """

    sent: float
    received: float
    date: datetime | None
    floor: datetime | None = None

    def knowing(self, *moments: datetime | None) -> ClockSample:
        """This sample, also knowing that the provider's clock had reached ``moments``."""
        # The latest of them, the first of equals (as max() picks); no list: this runs
        # on every answer read (and the constructor, not attrs.evolve, for the same reason).
        latest = self.floor
        for moment in moments:
            if moment is not None and (latest is None or moment > latest):
                latest = moment
        return self if latest is None else ClockSample(self.sent, self.received, self.date, latest)

    def provider_now_upper(self, monotonic_now: float) -> datetime | None:
        """A time the provider's clock has certainly not passed yet, or None without a Date.

        The answer was written at a provider time in ``[date, date + 1s)`` and
        at a local time no earlier than ``sent``; so now, the provider's clock
        reads less than ``date + 1s + (monotonic_now - sent)``. A provider
        timestamp above ``date + 1s`` proves the Date lags (a cache, a lagging
        node): the bound is then raised to that timestamp plus the same elapsed
        time, never below it, but it is no longer certain (the answer may have
        been written long after that timestamp), so :func:`still_valid` and the
        best estimate do not use it (see :attr:`lagging`). None also when the
        arithmetic leaves the calendar (a Date near year 9999).
        """
        if self.date is None:
            return None
        base = _next_second(self.date)
        if base is None:
            return None
        if self.floor is not None and self.floor > base:
            base = self.floor
        return _plus(base, max(0.0, monotonic_now - self.sent))

    @property
    def lagging(self) -> bool:
        """Whether the Date is behind a timestamp the same answer carried: not a clock reading."""
        if self.date is None or self.floor is None:
            return False
        base = _next_second(self.date)
        return base is not None and self.floor > base

    def certain_upper(self, monotonic_now: float) -> datetime | None:
        """:meth:`provider_now_upper` when it is certain (the Date does not lag), else None.

        ``None if self.lagging else self.provider_now_upper(monotonic_now)``, with the
        Date's second ended once: every expiry check asks it.
        """
        if self.date is None:
            return None
        base = _next_second(self.date)
        if base is None or (self.floor is not None and self.floor > base):
            return None
        return _plus(base, max(0.0, monotonic_now - self.sent))

    def provider_now_lower(self, monotonic_now: float) -> datetime | None:
        """A time the provider's clock has certainly reached by now, or None without a Date."""
        if self.date is None:
            return None
        base = self.date if self.floor is None else max(self.date, self.floor)
        return _plus(base, max(0.0, monotonic_now - self.received))

    def provider_now_best(self, monotonic_now: float) -> datetime | None:
        """Our best guess of the provider's clock now: a Date is written as its answer is.

        So the Date's second started at most a second before ``received``: half a
        second after the lower bound, never past the upper one.
        """
        lower = self.provider_now_lower(monotonic_now)
        upper = self.certain_upper(monotonic_now)
        if lower is None or upper is None:
            return None
        best = _plus(lower, 0.5)
        return None if best is None else min(best, upper)

    def to_local(self, provider_time: datetime) -> float | None:
        """The latest local monotonic time when the provider's clock reaches ``provider_time``."""
        if self.date is None:
            return None
        base = self.date if self.floor is None else max(self.date, self.floor)
        return self.received + (provider_time - base).total_seconds()


def still_valid(
    expires_at: datetime, sample: ClockSample, monotonic_now: float
) -> tuple[bool, float | None]:
    """Whether a call starting now starts before ``expires_at`` by the provider's clock.

    Returns ``(valid, seconds_left)``; ``seconds_left`` is None when it cannot be told
    (no usable Date header, one behind the answer's own timestamps, or one at the end
    of time), which callers treat as not valid.
    """
    upper = sample.certain_upper(monotonic_now)
    if upper is None:
        return False, None
    left = (expires_at - upper).total_seconds()
    return left > EXPIRY_SAFETY, left


def certainly_expired(expires_at: datetime, sample: ClockSample, monotonic_now: float) -> bool:
    """Whether ``expires_at`` has passed by a time the provider's clock has surely reached."""
    lower = sample.provider_now_lower(monotonic_now)
    return lower is not None and expires_at <= lower


def plausibly_expired(expires_at: datetime, sample: ClockSample, monotonic_now: float) -> bool:
    """Whether ``expires_at`` has passed by our best estimate of the provider's clock.

    Only then may an outcome say the approval *expired*; an approval refused
    because its margin was too thin to confirm has not (by our best estimate).
    """
    best = sample.provider_now_best(monotonic_now)
    if best is None:  # a lagging Date: only the lower bound is known
        return certainly_expired(expires_at, sample, monotonic_now)
    return expires_at <= best


def utc(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc)


def _plus(moment: datetime, seconds: float) -> datetime | None:
    """``moment + seconds``, or None past the calendar's ends (or for a non-finite value)."""
    try:
        return moment + timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return None


_ONE_SECOND = timedelta(seconds=1)


def _next_second(moment: datetime) -> datetime | None:
    """``_plus(moment, 1.0)`` without making the timedelta: a Date's second, ended."""
    try:
        return moment + _ONE_SECOND
    except OverflowError:
        return None
