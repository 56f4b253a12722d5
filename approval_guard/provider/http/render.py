"""The JSON forms of requests: the wire form, the review page's display texts, and the history."""

from __future__ import annotations

import hashlib
from typing import Any

from approval_guard._codec.display import (
    escape,
    escape_lines,
    is_hidden,
    pointer,
    with_markers_shown,
)
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import format_timestamp
from approval_guard._codec.wire_models import ApprovalRequest, request_to_json
from approval_guard.provider.rules.checks import refusal
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.rules.grant_words import decided_through
from approval_guard.provider.store.checks import changed_names
from approval_guard.provider.store.models import (
    Annotation,
    AuditEvent,
    AuditRow,
    Credential,
    History,
    StoredRequest,
)


def request_json(request: ApprovalRequest) -> dict[str, Any]:
    """The wire form of a request, with API 1.1's (and 1.3's) fields when they say anything.

    ``"editable"`` when it lists names, ``"requested_by"`` when the create gave
    one, and ``"approvals"`` with ``"approvals_required"`` when it needs more
    than one approval; API 1.3's ``"batch"`` and ``"context"`` when the create
    gave them.
    """
    out = request_to_json(request)
    if isinstance(request, StoredRequest):
        if request.editable:
            out["editable"] = list(request.editable)
        if request.requested_by is not None:
            out["requested_by"] = request.requested_by
        if request.approvals_required > 1:
            out["approvals"] = [
                {"by": one.by, "at": format_timestamp(one.at)} for one in request.approvals
            ]
            out["approvals_required"] = request.approvals_required
        if request.decision_grant is not None and isinstance(out.get("decision"), dict):
            # API 1.3: the standing grant that decided it when it was made.
            out["decision"]["grant"] = request.decision_grant
        if request.batch is not None:
            out["batch"] = request.batch
        if request.context is not None:
            out["context"] = request.context
    return out


def display_json(value: object, redacted: tuple[str, ...] = (), *, at: str = "") -> str:
    """A JSON value as a reviewer reads it: pretty, exact, markers shown, hidden ones escaped.

    ``redacted`` and ``at`` say which markers are redactions (see
    :func:`~approval_guard._codec.display.with_markers_shown`).
    """
    return escape_lines(dump_json(with_markers_shown(value, redacted, at=at), indent=2))


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def input_json(value: object) -> str:
    """A value as the page's input holds it: exact JSON that parses back to this very value.

    Hidden characters are written as JSON escapes (a surrogate pair beyond the
    BMP, not :func:`escape`'s ``\\U`` form), so the reviewer sees them and an
    untouched input still parses to the value it was filled with. Outside
    strings the writer emits only ASCII, so every hidden character is in one.
    """
    lines = dump_json(value, indent=2).split("\n")
    return "\n".join(
        "".join(_json_escape(char) if is_hidden(char) else char for char in line) for line in lines
    )


def listed_request_json(
    request: ApprovalRequest,
    annotation: Annotation | None = None,
    *,
    viewer: Credential | None = None,
    rule: ToolRule | None = None,
) -> dict[str, Any]:
    """A request as ``GET /v1/requests`` lists it: the wire form plus ``"display"``.

    ``display`` holds every text a reviewer is shown, made here and only here
    so the page never renders a value itself: ``arguments`` pretty-printed by
    the writer that makes the echo (each number exactly as stored, a guard's
    redaction marker as ``\u2039redacted 1a2b3c4d5e6f\u203a``), and every
    string with hidden characters escaped (:func:`approval_guard._codec.display.escape`).
    Present only when not empty: ``redacted`` (the paths of redacted values),
    ``editable`` (``[{"name", "text"}]``, ``text`` the exact JSON to prefill
    an input with, see :func:`input_json`) and, once approved with edits,
    ``changes`` (``[{"name", "before", "after"}]``); for a request that needs
    several approvals ``approvals`` (``"1 of 2 approvals: alice"``); when
    ``viewer`` may not decide it under ``rule``, ``read_only`` (the reason).
    API 1.3: ``context`` (the agent's stated reason, hidden characters
    escaped, line breaks kept), and ``batch`` with ``batch_group`` (an opaque
    key shared by the requests of one agent's batch, so the page groups them
    and never joins two agents' batches of the same name); once a standing
    grant or a rules-file auto-decision decided it, ``decided_through``
    (``"grant grant_1a2b of alice"``, ``"rule NAME"``).
    """
    note = request.decision.note if request.decision is not None else None
    decided_by = annotation.decided_by if annotation is not None else None
    reason = annotation.cancel_reason if annotation is not None else None
    redacted: list[str] = []
    shown = with_markers_shown(request.arguments, request.redacted, found=redacted)
    editable = request.editable if isinstance(request, StoredRequest) else ()
    edited = request.decision.arguments if request.decision is not None else None
    changes = []
    if edited is not None:
        for name in changed_names(request.arguments, edited):
            changes.append(
                {
                    "name": escape(name),
                    "before": display_json(
                        request.arguments.get(name), request.redacted, at=pointer((name,))
                    ),
                    "after": display_json(edited.get(name)),
                }
            )
    display: dict[str, Any] = {
        "tool": escape(request.tool),
        "arguments": escape_lines(dump_json(shown, indent=2)),
        "note": None if note is None else escape_lines(note),
        "decided_by": None if decided_by is None else escape(decided_by),
        "cancel_reason": None if reason is None else escape_lines(reason),
    }
    # Only when there is something to say: a plain request keeps the 1.0 display form.
    if redacted:
        display["redacted"] = [escape(path) for path in redacted]
    if editable:
        display["editable"] = [
            {"name": escape(name), "text": input_json(request.arguments[name])} for name in editable
        ]
    if changes:
        display["changes"] = changes
    if isinstance(request, StoredRequest):
        if request.approvals_required > 1:
            display["approvals"] = escape(approvals_text(request))
        if request.context:  # an empty reason says nothing: nothing to show
            display["context"] = escape_lines(request.context)
        if request.batch is not None:
            display["batch"] = escape(request.batch)
            owner = annotation.owner_id if annotation is not None else None
            display["batch_group"] = batch_group(owner, request.batch)
        if viewer is not None and rule is not None and request.is_pending:
            why = refusal(request, rule, viewer)
            if why is None and any(one.by == viewer.name for one in request.approvals):
                why = "you have already approved this request"
            if why is not None:
                display["read_only"] = escape(why)
        through = decided_through(request, rule)
        if through is not None:
            display["decided_through"] = escape(through)
    return {**request_json(request), "display": display}


def batch_group(owner_id: str | None, batch: str) -> str:
    """An opaque key naming one agent's batch (its credential id and the batch text)."""
    key = f"{owner_id or ''}\n{batch}".encode()
    return hashlib.sha256(key).hexdigest()[:24]


def approvals_text(request: StoredRequest) -> str:
    """``"1 of 2 approvals: alice"``: how far a request that needs several has come."""
    text = f"{len(request.approvals)} of {request.approvals_required} approvals"
    if request.approvals:
        text += ": " + ", ".join(one.by for one in request.approvals)
    return text


def audit_json(rows: list[AuditRow], *, display: bool = False) -> list[dict[str, Any]]:
    """Audit rows as JSON (the history's ``"audit"``, ``approval-guard audit --json``).

    With ``display`` each row also carries ``"display"``: the line the review
    page shows after the time (``"alice (127.0.0.1) · request.approval · 1 of
    2"``), with hidden characters escaped, so the page never renders a name itself.
    """
    out = []
    for row in rows:
        item: dict[str, Any] = {
            "seq": row.seq,
            "at": format_timestamp(row.at),
            "actor": row.actor,
            "source": row.source,
            "action": row.action,
            "request_id": row.request_id,
            "detail": row.detail,
        }
        if display:
            item["display"] = audit_line(row)
        out.append(item)
    return out


def audit_line(row: AuditRow) -> str:
    """One audit row as a reviewer reads it, hidden characters escaped (not the time)."""
    text = f"{row.actor} ({row.source}) · {row.action}"
    approvals = row.detail.get("approvals")
    if isinstance(approvals, str) and approvals:
        text += f" · {approvals}"
    return escape(text)


def _actor_json(credential: Credential | None) -> dict[str, str] | None:
    if credential is None:
        return None
    return {"id": credential.id, "name": credential.name, "kind": credential.kind}


def _event_json(event: AuditEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "at": format_timestamp(event.at),
        "type": event.type,
        "actor": _actor_json(event.actor),
        "detail": event.detail,
    }


def history_to_json(history: History) -> dict[str, Any]:
    """The wire form of a request's audit trail (``GET /v1/requests/{id}/history``)."""
    return {
        "request": request_json(history.request),
        "owner": _actor_json(history.owner),
        "poll_count": history.poll_count,
        "last_polled_at": (
            None if history.last_polled_at is None else format_timestamp(history.last_polled_at)
        ),
        "events": [_event_json(event) for event in history.events],
    }
