"""Durations: ``"30m"``, ``timedelta`` or seconds <-> the provider's canonical form.

The provider writes durations as ``<integer><unit>`` parts, units ``h``, ``m``,
``s``, largest first (``45s``, ``30m``, ``1h30m``). We accept any such string
(``"90s"`` too, sent as ``"1m30s"``), a :class:`datetime.timedelta`, or a plain
number of seconds. Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Union

DurationLike = Union[str, timedelta, int, float]  # noqa: UP007 (runtime alias on 3.10)

_PART = re.compile(r"(\d+)([hms])")
_WHOLE = re.compile(r"(?:\d+[hms])+")
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}
_UNIT_ORDER = "hms"


def parse_duration_string(text: str) -> int:
    """Parse the wire form (``"1h30m"``) into whole seconds, or raise ``ValueError``.

    Units must appear largest first and at most once, as the API writes them.
    ``"0s"`` parses to 0; callers that need a positive duration check that.
    """
    if not isinstance(text, str) or not _WHOLE.fullmatch(text):
        raise ValueError(f"malformed duration {text!r}: expected forms like '45s', '30m', '1h30m'")
    total = 0
    last = -1
    for number, unit in _PART.findall(text):
        rank = _UNIT_ORDER.index(unit)
        if rank <= last:
            raise ValueError(f"malformed duration {text!r}: units must be h, m, s, largest first")
        last = rank
        total += int(number) * _UNIT_SECONDS[unit]
    return total


def to_seconds(value: DurationLike, *, name: str = "duration") -> float:
    """Turn any accepted duration into a positive number of seconds.

    Raises ``ValueError`` for zero, negative, non-finite or malformed values and
    ``TypeError`` for anything that is not a duration at all.

    >>> to_seconds("1h30m"), to_seconds(timedelta(minutes=2)), to_seconds(45)
    (5400.0, 120.0, 45.0)
    """
    if isinstance(value, bool):
        raise TypeError(
            f"{name} must be a duration such as '30m', a timedelta or seconds, not a bool"
        )
    if isinstance(value, str):
        seconds = float(parse_duration_string(value.strip()))
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    else:
        raise TypeError(
            f"{name} must be a duration such as '30m', a timedelta or seconds, "
            f"not {type(value).__name__}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name} must be a positive duration, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """Write whole seconds in canonical form, rounding a fraction down.

    >>> format_duration(5400), format_duration(45), format_duration(0)
    ('1h30m', '45s', '0s')
    """
    total = max(0, math.floor(seconds))
    if total == 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if secs:
        out += f"{secs}s"
    return out


def canonical(value: DurationLike, *, name: str = "duration") -> str:
    """Validate ``value`` and return its canonical wire form (whole seconds, rounded down)."""
    seconds = to_seconds(value, name=name)
    if seconds < 1:
        raise ValueError(f"{name} must be at least 1s, got {value!r}")
    return format_duration(seconds)


_AGE = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_age(text: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"1d12h"``, ``"90m"``, ``"45s"`` -> a positive timedelta.

    >>> parse_age("1d12h")
    datetime.timedelta(days=1, seconds=43200)
    """
    match = _AGE.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"not an age: {text!r} (use forms like 30d, 12h, 90m, 1d12h)")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    age = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if age <= timedelta(0):
        raise ValueError(f"the age must be positive, not {text!r}")
    return age


def format_age(age: timedelta) -> str:
    """The inverse of :func:`parse_age`: ``timedelta(days=1, hours=12)`` -> ``"1d12h"``."""
    total = int(age.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def format_time_left(seconds: float) -> str:
    """``"29m 54s left"``; ``"deadline passed"`` once it has."""
    seconds = int(seconds)
    if seconds <= 0:
        return "deadline passed"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s left"
    if minutes:
        return f"{minutes}m {secs:02d}s left"
    return f"{secs}s left"
