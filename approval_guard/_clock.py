"""Time: a ``Clock`` protocol (monotonic, wall, interruptible sleep) and deadline arithmetic.

Every local deadline is on the monotonic clock. The provider's timestamps are
on *its* clock, which may be minutes away from ours; we relate the two through
the ``Date`` header of each answer, conservatively (it has one-second
resolution and was written somewhere inside the round trip).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Protocol

import attrs

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
        """Sleep up to ``seconds``; return True at once if ``abandon`` is (or becomes) set."""
        ...


class SystemClock:
    """The real clocks: ``time.monotonic`` and ``datetime.now(timezone.utc)``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def sleep(self, seconds: float, abandon: threading.Event | None = None) -> bool:
        if abandon is not None:
            return abandon.wait(max(0.0, seconds))
        time.sleep(max(0.0, seconds))
        return False

    def __repr__(self) -> str:
        return "SystemClock()"


@attrs.frozen
class ClockSample:
    """When (on our monotonic clock) we sent a request, when its answer came, and its Date."""

    sent: float
    received: float
    date: datetime | None

    def provider_now_upper(self, monotonic_now: float) -> datetime | None:
        """A time the provider's clock has certainly not passed yet, or None without a Date.

        The answer was written at a provider time in ``[date, date + 1s)`` and
        at a local time no earlier than ``sent``; so now, the provider's clock
        reads less than ``date + 1s + (monotonic_now - sent)``.
        """
        if self.date is None:
            return None
        return self.date + timedelta(seconds=1 + max(0.0, monotonic_now - self.sent))

    def to_local(self, provider_time: datetime) -> float | None:
        """The latest local monotonic time when the provider's clock reaches ``provider_time``."""
        if self.date is None:
            return None
        return self.received + (provider_time - self.date).total_seconds()


def still_valid(
    expires_at: datetime, sample: ClockSample, monotonic_now: float
) -> tuple[bool, float | None]:
    """Whether a call starting now starts before ``expires_at`` by the provider's clock.

    Returns ``(valid, seconds_left)``; ``seconds_left`` is None when it cannot be told
    (no usable Date header), which callers treat as not valid.
    """
    try:
        upper = sample.provider_now_upper(monotonic_now)
    except OverflowError:  # a Date near the end of time: nothing can be judged from it
        return False, None
    if upper is None:
        return False, None
    left = (expires_at - upper).total_seconds()
    return left > EXPIRY_SAFETY, left


def utc(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc)
