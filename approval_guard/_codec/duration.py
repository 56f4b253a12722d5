"""Durations: ``"30m"``, ``timedelta`` or seconds <-> text; the package's only duration codec.

The provider writes durations as ``<integer><unit>`` parts, units ``h``, ``m``,
``s``, largest first (``45s``, ``30m``, ``1h30m``). We accept any such string
(``"90s"`` too, sent as ``"1m30s"``), a :class:`datetime.timedelta`, or a plain
number of seconds. The ledger command's ages add days (``"30d"``,
:func:`parse_age`); a reviewer reads time left as ``"29m 54s left"``
(:func:`format_time_left`). Digits are ASCII only: an Arabic-Indic "1h" is not a duration.
Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Union

DurationLike = Union[str, timedelta, int, float]  # noqa: UP007 (runtime alias on 3.10)

# [0-9], not \d: \d matches every script's digits, and int() reads them all.
_PART = re.compile(r"([0-9]+)([hms])")
_WHOLE = re.compile(r"(?:[0-9]+[hms])+")
_AGE = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}
_UNIT_ORDER = "hms"
_AGE_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


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


def _write_parts(total: int, units: tuple[tuple[str, int], ...]) -> str:
    parts = []
    for unit, size in units:
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def format_duration(seconds: float) -> str:
    """Write whole seconds in canonical form, rounding a fraction down.

    >>> format_duration(5400), format_duration(45), format_duration(0)
    ('1h30m', '45s', '0s')
    """
    return _write_parts(max(0, math.floor(seconds)), _AGE_UNITS[1:])


def canonical(value: DurationLike, *, name: str = "duration") -> str:
    """Validate ``value`` and return its canonical wire form (whole seconds, rounded down)."""
    seconds = to_seconds(value, name=name)
    if seconds < 1:
        raise ValueError(f"{name} must be at least 1s, got {value!r}")
    return format_duration(seconds)


def check_duration_text(value: object, name: str, low: int, high: int) -> int:
    """A wire duration string as whole seconds between ``low`` and ``high``, or ValueError.

    The message starts with ``name``, as a request's field is named in an error.
    """
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a duration string such as '30m'")
    try:
        seconds = parse_duration_string(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if not low <= seconds <= high:
        raise ValueError(
            f"{name} must be between {format_duration(low)} and {format_duration(high)}"
        )
    return seconds


def to_timedelta(value: DurationLike, *, name: str = "duration") -> timedelta:
    """Any accepted duration as a ``timedelta``, zero and negative ones included.

    For tests that make an approval that has already expired; use
    :func:`to_seconds` where only a positive duration makes sense.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        return timedelta(seconds=parse_duration_string(value.strip()))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a duration string, timedelta or seconds: {value!r}")
    return timedelta(seconds=value)


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
    return _write_parts(int(age.total_seconds()), _AGE_UNITS)


def format_time_left(seconds: float) -> str:
    """``"29m 54s left"`` (whole seconds, cut toward zero); ``"deadline passed"`` once it has.

    >>> format_time_left(3725.9), format_time_left(65), format_time_left(0.5)
    ('1h 02m 05s left', '1m 05s left', 'deadline passed')
    """
    whole = int(seconds)
    if whole <= 0:
        return "deadline passed"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s left"
    if minutes:
        return f"{minutes}m {secs:02d}s left"
    return f"{secs}s left"
