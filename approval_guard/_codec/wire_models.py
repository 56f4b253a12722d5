"""Provider JSON <-> attrs models. The only module that knows the wire's field names.

Strict where safety depends on it (ids, statuses, timestamps) and lenient
about fields it does not know, so that a provider may add fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from approval_guard._codec.safe_text import safe_text
from approval_guard._codec.wire import (
    MAX_ID_LENGTH,
    MESSAGE_LIMIT,
    NAMES_LIMIT,
    PENDING,
    QUOTE_LIMIT,
    RULE_PREFIX,
    STATUSES,
    WireError,
    format_timestamp,
    parse_timestamp,
)


@attrs.frozen
class Grant:
    """API 1.3: the standing grant that decided a request when it was created.

    Only ever reported (events, logs, spans, the outcome's sentence), never
    trusted: the request's status and ``decision.expires_at`` alone say whether
    the call may run. Each part is None when the provider sent none usable.
    """

    #: The grant's id (a plain identifier, as a request id is).
    id: str
    #: Who gave it, ``"alice"`` or ``"alice, bob"`` (scrubbed, bounded).
    granted_by: str | None = None
    granted_at: datetime | None = None
    expires_at: datetime | None = None
    #: Covered calls it may still decide (None: unlimited, or not said).
    uses_left: int | None = None


@attrs.frozen(slots=False)  # dict-backed, as ApprovalRequest (below) is: one per answer read
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
    #: API 1.3: the standing grant that decided it at create time (None: a person, or a rule).
    grant: Grant | None = None

    @property
    def rule(self) -> str | None:
        """API 1.3: the rules-file auto-decision that decided it (``decided_by`` ``rule:NAME``)."""
        by = self.decided_by
        if self.grant is None and by is not None and by.startswith(RULE_PREFIX):
            return by[len(RULE_PREFIX) :] or None
        return None


# Not slotted: attrs writes a frozen instance's fields into its __dict__ directly,
# about twice as fast as through object.__setattr__ per slot; one is made per answer.
@attrs.frozen(slots=False)
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
    #: API 1.3: the batch (one turn's calls) the request belongs to, exactly as echoed.
    batch: str | None = None
    #: API 1.3: the agent's stated reason, exactly as echoed (compared, never quoted).
    context: str | None = None
    #: API 1.3: the JSON Pointers of the arguments the guard redacted (only these
    #: markers are shown as redactions; see ``_codec.display.with_markers_shown``).
    redacted: tuple[str, ...] = ()

    @property
    def is_pending(self) -> bool:
        return self.status == PENDING


def _require(obj: dict[str, Any], field: str, kind: type | tuple[type, ...]) -> Any:
    if field not in obj:
        raise WireError(f"the request object has no {field!r}")
    value = obj[field]
    if type(value) is kind:  # what JSON decodes to: no isinstance needed
        return value
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise WireError(f"{field!r} has the wrong type: {type(value).__name__}")
    return value


def parse_decision(obj: object) -> Decision:
    if not isinstance(obj, dict):
        raise WireError("'decision' is not an object")
    status = obj.get("status")
    if type(status) is not str:
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
    grant = obj.get("grant")
    return Decision(
        status=status,
        note=note,
        decided_at=decided_at,
        expires_at=expires_at,
        arguments=arguments,
        # Only ever quoted (events, logs): anything but a string is no name at all.
        decided_by=safe_text(decided_by, NAMES_LIMIT) if isinstance(decided_by, str) else None,
        grant=None if grant is None else parse_grant(grant),
    )


def parse_grant(obj: object) -> Grant | None:
    """``decision.grant`` (API 1.3), or None when it is unusable; never raises.

    Informational only: a malformed part is dropped (a grant without a plain id
    is dropped whole), and nothing a provider writes here can make a call run.
    """
    if not isinstance(obj, dict):
        return None
    grant_id = obj.get("id")
    if not _plain_id(grant_id):
        return None
    assert isinstance(grant_id, str)
    return Grant(
        id=grant_id,
        granted_by=_names(obj.get("granted_by")),
        granted_at=_maybe_timestamp(obj.get("granted_at")),
        expires_at=_maybe_timestamp(obj.get("expires_at")),
        uses_left=_count(obj.get("uses_left")),
    )


def _plain_id(value: object) -> bool:
    """1 to 200 printable characters without a space: fit for URLs, log lines and outcomes."""
    return (
        type(value) is str
        and 0 < len(value) <= MAX_ID_LENGTH
        and " " not in value
        and value.isprintable()
    )


def _names(value: object) -> str | None:
    """``"alice"`` or ``["alice", "bob"]`` as ``"alice, bob"`` (scrubbed, bounded); else None."""
    if isinstance(value, str):
        names = [value]
    elif isinstance(value, list) and value and all(isinstance(name, str) for name in value):
        names = value
    else:
        return None
    joined = ", ".join(names)
    return safe_text(joined, NAMES_LIMIT) if joined.strip() else None


def _maybe_timestamp(value: object) -> datetime | None:
    try:
        return None if value is None else parse_timestamp(value, field="grant")
    except WireError:
        return None


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _requested_by(value: object) -> str | None:
    """An echoed ``requested_by``, kept exactly (it is compared with what was sent)."""
    return _echoed(value, "requested_by")


def _echoed(value: object, field: str) -> str | None:
    """An echoed string field, kept exactly (it is compared with what was sent)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise WireError(f"{field!r} is not a string")
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


def _redacted(value: object) -> tuple[str, ...]:
    """An echoed ``redacted``: a list of strings, else nothing (no marker is shown as one)."""
    if not isinstance(value, list) or not all(isinstance(path, str) for path in value):
        return ()
    return tuple(value)


def parse_request(obj: object) -> ApprovalRequest:
    """Build an :class:`ApprovalRequest` from decoded JSON, or raise :class:`WireError`."""
    if not isinstance(obj, dict):
        raise WireError("the answer is not a JSON object")
    decision_raw = obj.get("decision")
    cancelled_raw = obj.get("cancelled_at")
    editable_raw = obj.get("editable")
    requested_by = obj.get("requested_by")
    batch = obj.get("batch")
    context = obj.get("context")
    redacted_raw = obj.get("redacted")
    # Each field as JSON decodes it is taken at once; anything else goes through _require,
    # which says what is wrong with it (in the same order: id, status, tool, ...).
    request_id = obj.get("id")
    if type(request_id) is not str:
        request_id = _require(obj, "id", str)
    if not _plain_id(request_id):
        # It goes into URLs, log lines and the outcome: an odd one is not trusted.
        raise WireError("'id' is not a plain identifier of 1 to 200 characters")
    status = obj.get("status")
    if type(status) is not str:
        status = _require(obj, "status", str)
    if status not in STATUSES:
        status = safe_text(status, QUOTE_LIMIT)  # quoted as "an unknown status"
    tool = obj.get("tool")
    if type(tool) is not str:
        tool = _require(obj, "tool", str)
    arguments = obj.get("arguments")
    if type(arguments) is not dict:
        arguments = _require(obj, "arguments", dict)
    timeout = obj.get("timeout")
    if type(timeout) is not str:
        timeout = _require(obj, "timeout", str)
    return ApprovalRequest(
        id=request_id,
        tool=tool,
        arguments=arguments,
        timeout=timeout,
        status=status,
        created_at=parse_timestamp(obj.get("created_at"), field="created_at"),
        deadline_at=parse_timestamp(obj.get("deadline_at"), field="deadline_at"),
        decision=None if decision_raw is None else parse_decision(decision_raw),
        cancelled_at=(
            None if cancelled_raw is None else parse_timestamp(cancelled_raw, field="cancelled_at")
        ),
        # API 1.1's fields, read only when there (each reads None as absent).
        editable=None if editable_raw is None else _editable(editable_raw),
        requested_by=None if requested_by is None else _requested_by(requested_by),
        quorum=None if "approvals" not in obj else _quorum(obj),
        # API 1.3's echoes, kept exactly (compared with what was sent, as requested_by is).
        batch=None if batch is None else _echoed(batch, "batch"),
        context=None if context is None else _echoed(context, "context"),
        redacted=() if redacted_raw is None else _redacted(redacted_raw),
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
    if decision.grant is not None:
        out["grant"] = grant_to_json(decision.grant)
    return out


def grant_to_json(grant: Grant) -> dict[str, Any]:
    """``decision.grant``'s wire form (API 1.3); ``granted_by`` as a list of names."""
    return {
        "id": grant.id,
        "granted_by": [] if grant.granted_by is None else grant.granted_by.split(", "),
        "granted_at": None if grant.granted_at is None else format_timestamp(grant.granted_at),
        "expires_at": None if grant.expires_at is None else format_timestamp(grant.expires_at),
        "uses_left": grant.uses_left,
    }


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
    if request.batch is not None:
        out["batch"] = request.batch
    if request.context is not None:
        out["context"] = request.context
    if request.redacted:
        out["redacted"] = list(request.redacted)
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
