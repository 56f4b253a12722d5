"""Provider JSON <-> attrs models. The only module that knows the wire's field names.

Parsing is strict where safety depends on it (ids, statuses, timestamps) and
lenient about fields it does not know, so that a provider may add fields.
Anything doubtful raises :class:`WireError`, which callers treat as "does not
permit execution".
"""

from __future__ import annotations

import email.utils
from datetime import datetime, timezone
from typing import Any

import attrs
from dateutil.parser import isoparse

PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"
CANCELLED = "cancelled"
STATUSES = (PENDING, APPROVED, DENIED, EXPIRED, CANCELLED)


class WireError(ValueError):
    """A provider answer that does not have the shape the API promises."""


def parse_timestamp(value: object, *, field: str) -> datetime:
    """Parse an RFC 3339 timestamp with any offset into an aware UTC datetime."""
    if not isinstance(value, str) or "T" not in value.upper():
        raise WireError(f"{field} is not an RFC 3339 timestamp: {value!r}")
    if len(value) in (20, 24, 27) and value[10] == "T" and value[-1] == "Z":
        # The form providers write (whole seconds, ms or µs); the stdlib reads it
        # several times faster than dateutil. Anything else takes the general path.
        try:
            return datetime.fromisoformat(value[:-1] + "+00:00")
        except ValueError:
            pass
    try:
        parsed = isoparse(value)
    except (ValueError, OverflowError) as exc:
        raise WireError(f"{field} is not an RFC 3339 timestamp: {value!r}") from exc
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise WireError(f"{field} has no UTC offset: {value!r}")
    return parsed.astimezone(timezone.utc)


def format_timestamp(moment: datetime) -> str:
    """Write an aware datetime as RFC 3339 UTC with a ``Z`` (milliseconds when present)."""
    moment = moment.astimezone(timezone.utc)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_http_date(value: str | None) -> datetime | None:
    """Parse an HTTP ``Date`` header; None if absent or unreadable."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


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
    return Decision(status=status, note=note, decided_at=decided_at, expires_at=expires_at)


def parse_request(obj: object) -> ApprovalRequest:
    """Build an :class:`ApprovalRequest` from decoded JSON, or raise :class:`WireError`."""
    if not isinstance(obj, dict):
        raise WireError("the answer is not a JSON object")
    decision_raw = obj.get("decision")
    cancelled_raw = obj.get("cancelled_at")
    return ApprovalRequest(
        id=_require(obj, "id", str),
        tool=_require(obj, "tool", str),
        arguments=_require(obj, "arguments", dict),
        timeout=_require(obj, "timeout", str),
        status=_require(obj, "status", str),
        created_at=parse_timestamp(obj.get("created_at"), field="created_at"),
        deadline_at=parse_timestamp(obj.get("deadline_at"), field="deadline_at"),
        decision=None if decision_raw is None else parse_decision(decision_raw),
        cancelled_at=(
            None if cancelled_raw is None else parse_timestamp(cancelled_raw, field="cancelled_at")
        ),
    )


def decision_to_json(decision: Decision) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": decision.status,
        "note": decision.note,
        "decided_at": format_timestamp(decision.decided_at),
    }
    if decision.expires_at is not None:
        out["expires_at"] = format_timestamp(decision.expires_at)
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
    return out


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The API's error body: ``{"error": {"type": ..., "message": ...}}``."""
    return {"error": {"type": kind, "message": message}}


def parse_error(obj: object) -> tuple[str, str] | None:
    """``(type, message)`` from an error body, or None if it is not one."""
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            kind, message = err.get("type"), err.get("message")
            if isinstance(kind, str):
                return kind, message if isinstance(message, str) else ""
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
