"""The wire's vocabulary: statuses, limits, :class:`WireError`, RFC 3339 timestamps, HTTP dates.

Parsing is strict where safety depends on it: anything doubtful raises
:class:`WireError`, which callers treat as "does not permit execution". The
models built from these are in :mod:`approval_guard._codec.wire_models`.
"""

from __future__ import annotations

import email.utils
import re
import sys
from datetime import datetime, timedelta, timezone

from approval_guard._codec.safe_text import safe_text

PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"
CANCELLED = "cancelled"
STATUSES = (PENDING, APPROVED, DENIED, EXPIRED, CANCELLED)


#: A provider-supplied text quoted in a message is cut to this many characters.
QUOTE_LIMIT = 80
#: A provider's error message (and so any sentence built from it) is cut to this.
MESSAGE_LIMIT = 500
#: A ``decided_by`` is cut to this: room for ten names of 64 characters and their commas.
NAMES_LIMIT = 700
#: The longest ``requested_by`` the API allows.
MAX_REQUESTED_BY = 200
#: The longest ``batch`` the guard sends (API 1.3).
MAX_BATCH = 200
#: The longest ``context`` (the agent's stated reason) the API allows (API 1.3).
MAX_CONTEXT = 1000
#: ``decision.decided_by`` of a rules-file auto-decision: ``"rule:NAME"`` (API 1.3).
RULE_PREFIX = "rule:"


def quote(value: object) -> str:
    """A provider value for a message: a short, scrubbed ``repr`` (strings) or its type."""
    if isinstance(value, str):
        return repr(safe_text(value, QUOTE_LIMIT))
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return f"a {type(value).__name__}"


class WireError(ValueError):
    """A provider answer that does not have the shape the API promises.

    The message is bounded, printable and scrubbed, since it may end up in a
    ``NotRun`` sentence and in the log.
    """

    def __init__(self, message: str) -> None:
        super().__init__(safe_text(message, MESSAGE_LIMIT))


# RFC 3339 `date-time`, and nothing else: not ISO 8601's week dates, ordinal
# dates, basic format or reduced precision, which dateutil would also accept.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
).fullmatch
# The form providers write (UTC, whole seconds, ms or µs), which the stdlib reads as it is.
_USUAL_FORM = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{3}|\.[0-9]{6})?Z"
).fullmatch
_READS_Z = sys.version_info >= (3, 11)  # 3.10's fromisoformat wants "+00:00"
MIN_YEAR = 1970
#: Longer request ids are refused (ours are UUIDs).
MAX_ID_LENGTH = 200
#: A year later code can still add hours and days to without overflowing.
MAX_YEAR = 9998


def parse_timestamp(value: object, *, field: str) -> datetime:
    """Parse an RFC 3339 timestamp with any offset into an aware UTC datetime.

    Anything else is a :class:`WireError`: another ISO 8601 form, a leap second
    (``:60``, which a datetime cannot hold), a year outside 1970..9998. A
    fraction finer than a microsecond is truncated, never rounded: the instant
    kept is never later than the one written, so an ``expires_at`` can only
    come out earlier (stricter), never later.
    """
    if type(value) is not str:
        return _parse_timestamp(value, field)
    parsed = _PARSED.get(value)
    if parsed is not None:
        return parsed
    if _USUAL_FORM(value) is None:
        return _parse_timestamp(value, field)
    try:
        parsed = datetime.fromisoformat(value if _READS_Z else value[:-1] + "+00:00")
    except ValueError:
        raise WireError(f"{field} is not a valid RFC 3339 timestamp: {quote(value)}") from None
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise WireError(f"{field} is outside the years {MIN_YEAR}..{MAX_YEAR}: {quote(value)}")
    # Every answer about a request repeats its timestamps: each is read once.
    if len(_PARSED) >= _MAX_PARSED:
        _PARSED.clear()
    _PARSED[value] = parsed
    return parsed


#: Timestamps of the usual form already read, and what they read as (datetimes are immutable).
_PARSED: dict[str, datetime] = {}
_MAX_PARSED = 4096


def _parse_timestamp(value: object, field: str) -> datetime:
    """Every other RFC 3339 form: a ``t``/``z``, an offset, another length of fraction."""
    match = _RFC3339(value) if isinstance(value, str) else None
    if match is None:
        raise WireError(f"{field} is not an RFC 3339 timestamp: {quote(value)}")
    text = match.string
    fraction, offset = match.groups()
    text = (
        text[:10]
        + "T"
        + text[11:19]
        + ("" if fraction is None else (fraction + "000000")[:7])  # truncated, never rounded
        + ("+00:00" if offset in ("Z", "z") else offset)
    )
    try:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is not timezone.utc:
            parsed = parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise WireError(f"{field} is not a valid RFC 3339 timestamp: {quote(value)}") from None
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise WireError(f"{field} is outside the years {MIN_YEAR}..{MAX_YEAR}: {quote(value)}")
    return parsed


def format_timestamp(moment: datetime) -> str:
    """Write an aware datetime as RFC 3339 UTC with a ``Z`` (milliseconds when present)."""
    if moment.tzinfo is not timezone.utc:
        moment = moment.astimezone(timezone.utc)
    # isoformat truncates to milliseconds as the wire keeps them, and writes "+00:00" last.
    if moment.microsecond:
        return moment.isoformat(timespec="milliseconds")[:-6] + "Z"
    return moment.isoformat(timespec="seconds")[:-6] + "Z"


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_M = "|".join(_MONTHS)
_D = "|".join(_DAYS)
# RFC 9110 HTTP-date: IMF-fixdate, or the obsolete asctime form. The obsolete
# rfc850 form is refused: its two-digit year would have to be guessed.
_IMF_FIXDATE = re.compile(
    rf"({_D}), ([0-9]{{2}}) ({_M}) ([0-9]{{4}}) ([0-9]{{2}}):([0-9]{{2}}):([0-9]{{2}}) GMT"
)
_ASCTIME = re.compile(
    rf"({_D}) ({_M}) ([0-9 ][0-9]) ([0-9]{{2}}):([0-9]{{2}}):([0-9]{{2}}) ([0-9]{{4}})"
)


def parse_http_date(value: str | None) -> datetime | None:
    """Parse an HTTP-date (``Date``, ``Retry-After``) strictly; None if absent or doubtful.

    Only RFC 9110's forms, in GMT, with a weekday that matches the date and a
    year in 1970..9998 (so that adding hours to it cannot overflow). Never raises.
    """
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    value = value.strip(" \t")
    match = _IMF_FIXDATE.fullmatch(value)
    if match is not None:
        weekday, day, month, year, hour, minute, second = match.groups()
    else:
        match = _ASCTIME.fullmatch(value)
        if match is None:
            return None
        weekday, month, day, hour, minute, second, year = match.groups()
    try:
        moment = datetime(
            int(year),
            _MONTHS.index(month) + 1,
            int(day),
            int(hour),
            int(minute),
            int(second),  # a leap second (:60) is refused here: fail closed
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None
    if not MIN_YEAR <= moment.year <= MAX_YEAR or _DAYS[moment.weekday()] != weekday:
        return None
    return moment


def format_http_date(moment: datetime) -> str:
    """Write an HTTP ``Date`` header value (one-second resolution, as HTTP has)."""
    # The text is written from the second itself, so the two always agree.
    second = epoch_second(moment)
    last_second, last_text = _LAST_HTTP_DATE[0]
    if last_second == second:
        # Every answer in one second carries the same text: written once.
        return last_text
    text = email.utils.format_datetime(_EPOCH + timedelta(seconds=second), usegmt=True)
    _LAST_HTTP_DATE[0] = (second, text)
    return text


def epoch_second(moment: datetime) -> int:
    """The whole second since 1970 that an aware ``moment`` is in, counted exactly.

    Not ``int(moment.timestamp())``: ``int`` puts both sides of 1970 in second 0,
    and the float rounds a moment in a second's last microseconds (3059-01-01
    00:00:00.999997) up into the next second.
    """
    return (moment - _EPOCH) // _ONE_SECOND


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_SECOND = timedelta(seconds=1)
#: The last second written by :func:`format_http_date`, and its text (none yet).
_LAST_HTTP_DATE: list[tuple[int | None, str]] = [(None, "")]


__all__ = [
    "APPROVED",
    "CANCELLED",
    "DENIED",
    "EXPIRED",
    "PENDING",
    "STATUSES",
    "WireError",
    "epoch_second",
    "format_http_date",
    "format_timestamp",
    "parse_http_date",
    "parse_timestamp",
]
