"""Provider JSON <-> attrs models. The only module that knows the wire's field names.

Parsing is strict where safety depends on it (ids, statuses, timestamps) and
lenient about fields it does not know, so that a provider may add fields.
Anything doubtful raises :class:`WireError`, which callers treat as "does not
permit execution".
"""

from __future__ import annotations

import email.utils
import re
import sys
from datetime import datetime, timezone
from typing import Any

import attrs

from approval_guard._transport.scrub import safe_text

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
    if type(value) is not str or _USUAL_FORM(value) is None:
        return _parse_timestamp(value, field)
    try:
        parsed = datetime.fromisoformat(value if _READS_Z else value[:-1] + "+00:00")
    except ValueError:
        raise WireError(f"{field} is not a valid RFC 3339 timestamp: {quote(value)}") from None
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise WireError(f"{field} is outside the years {MIN_YEAR}..{MAX_YEAR}: {quote(value)}")
    return parsed


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
    moment = moment.astimezone(timezone.utc)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


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
    return email.utils.format_datetime(moment.astimezone(timezone.utc), usegmt=True)


@attrs.frozen
class Decision:
    """A person's decision on a request: ``approved`` (with ``expires_at``) or ``denied``."""

    status: str
    note: str | None
    decided_at: datetime
    expires_at: datetime | None = None
    #: API 1.1: the whole arguments object with a reviewer's edits, when it has any.
    arguments: dict[str, Any] | None = None
    #: API 1.1: the reviewer's name as the provider authenticated them (scrubbed, bounded).
    decided_by: str | None = None


@attrs.frozen
class ApprovalRequest:
    """An approval request as the provider describes it."""

    id: str
    tool: str
    arguments: dict[str, Any]
    timeout: str
    status: str
    created_at: datetime
    deadline_at: datetime
    decision: Decision | None = None
    cancelled_at: datetime | None = None
    #: API 1.1: the names the provider echoes as editable (None: it did not say).
    editable: tuple[str, ...] | None = None
    #: API 1.1: the person the request is made for, exactly as echoed (None: not echoed).
    requested_by: str | None = None
    #: API 1.1: ``(approvals so far, approvals required)`` while a request needs several.
    quorum: tuple[int, int] | None = None

    @property
    def is_pending(self) -> bool:
        return self.status == PENDING


def _require(obj: dict[str, Any], field: str, kind: type | tuple[type, ...]) -> Any:
    if field not in obj:
        raise WireError(f"the request object has no {field!r}")
    value = obj[field]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise WireError(f"{field!r} has the wrong type: {type(value).__name__}")
    return value


def parse_decision(obj: object) -> Decision:
    if not isinstance(obj, dict):
        raise WireError("'decision' is not an object")
    status = _require(obj, "status", str)
    note = obj.get("note")
    if note is not None and not isinstance(note, str):
        raise WireError("'decision.note' is not a string")
    decided_at = parse_timestamp(obj.get("decided_at"), field="decision.decided_at")
    raw_expires = obj.get("expires_at")
    expires_at = None
    if raw_expires is not None:
        expires_at = parse_timestamp(raw_expires, field="decision.expires_at")
    arguments = obj.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise WireError("'decision.arguments' is not an object")
    decided_by = obj.get("decided_by")
    return Decision(
        status=status,
        note=note,
        decided_at=decided_at,
        expires_at=expires_at,
        arguments=arguments,
        # Only ever quoted (events, logs): anything but a string is no name at all.
        decided_by=safe_text(decided_by, NAMES_LIMIT) if isinstance(decided_by, str) else None,
    )


def _requested_by(value: object) -> str | None:
    """An echoed ``requested_by``, kept exactly (it is compared with what was sent)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise WireError("'requested_by' is not a string")
    return value


def _quorum(obj: dict[str, Any]) -> tuple[int, int] | None:
    """``(approvals so far, required)``; None unless both are there and make sense.

    Only ever reported (events), never trusted: the status alone says whether
    the request is approved.
    """
    approvals, required = obj.get("approvals"), obj.get("approvals_required")
    if not isinstance(approvals, list) or type(required) is not int or required < 1:
        return None
    return len(approvals), required


def _editable(value: object) -> tuple[str, ...] | None:
    """An echoed ``editable``: a list of strings, else None (no edit can be trusted)."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return None
    return tuple(value)


def parse_request(obj: object) -> ApprovalRequest:
    """Build an :class:`ApprovalRequest` from decoded JSON, or raise :class:`WireError`."""
    if not isinstance(obj, dict):
        raise WireError("the answer is not a JSON object")
    decision_raw = obj.get("decision")
    cancelled_raw = obj.get("cancelled_at")
    request_id = _require(obj, "id", str)
    if (
        not 0 < len(request_id) <= MAX_ID_LENGTH
        or " " in request_id
        or not (request_id.isprintable())
    ):
        # It goes into URLs, log lines and the outcome: an odd one is not trusted.
        raise WireError("'id' is not a plain identifier of 1 to 200 characters")
    status = _require(obj, "status", str)
    if status not in STATUSES:
        status = safe_text(status, QUOTE_LIMIT)  # quoted as "an unknown status"
    return ApprovalRequest(
        id=request_id,
        tool=_require(obj, "tool", str),
        arguments=_require(obj, "arguments", dict),
        timeout=_require(obj, "timeout", str),
        status=status,
        created_at=parse_timestamp(obj.get("created_at"), field="created_at"),
        deadline_at=parse_timestamp(obj.get("deadline_at"), field="deadline_at"),
        decision=None if decision_raw is None else parse_decision(decision_raw),
        cancelled_at=(
            None if cancelled_raw is None else parse_timestamp(cancelled_raw, field="cancelled_at")
        ),
        editable=_editable(obj.get("editable")),
        requested_by=_requested_by(obj.get("requested_by")),
        quorum=_quorum(obj),
    )


def decision_to_json(decision: Decision) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": decision.status,
        "note": decision.note,
        "decided_at": format_timestamp(decision.decided_at),
    }
    if decision.expires_at is not None:
        out["expires_at"] = format_timestamp(decision.expires_at)
    if decision.arguments is not None:
        out["arguments"] = decision.arguments
    if decision.decided_by is not None:
        out["decided_by"] = decision.decided_by
    return out


def request_to_json(request: ApprovalRequest) -> dict[str, Any]:
    """The wire form of a request, as a provider writes it."""
    out: dict[str, Any] = {
        "id": request.id,
        "tool": request.tool,
        "arguments": request.arguments,
        "timeout": request.timeout,
        "status": request.status,
        "created_at": format_timestamp(request.created_at),
        "deadline_at": format_timestamp(request.deadline_at),
    }
    if request.decision is not None:
        out["decision"] = decision_to_json(request.decision)
    if request.cancelled_at is not None:
        out["cancelled_at"] = format_timestamp(request.cancelled_at)
    if request.editable:
        out["editable"] = list(request.editable)
    if request.requested_by is not None:
        out["requested_by"] = request.requested_by
    return out


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The API's error body: ``{"error": {"type": ..., "message": ...}}``."""
    return {"error": {"type": kind, "message": message}}


def parse_error(obj: object) -> tuple[str, str] | None:
    """``(type, message)`` from an error body, or None if it is not one.

    Both are fit to quote (see :func:`safe_text`): a message is cut to
    ``MESSAGE_LIMIT`` characters.
    """
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            kind, message = err.get("type"), err.get("message")
            if isinstance(kind, str):
                # Quoted in logs and in the sentence a model is given: bounded and scrubbed.
                return safe_text(kind, QUOTE_LIMIT), (
                    safe_text(message, MESSAGE_LIMIT) if isinstance(message, str) else ""
                )
    return None


__all__ = [
    "APPROVED",
    "CANCELLED",
    "DENIED",
    "EXPIRED",
    "PENDING",
    "STATUSES",
    "ApprovalRequest",
    "Decision",
    "WireError",
    "decision_to_json",
    "error_body",
    "format_http_date",
    "format_timestamp",
    "parse_decision",
    "parse_error",
    "parse_http_date",
    "parse_request",
    "parse_timestamp",
    "request_to_json",
]
