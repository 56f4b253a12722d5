"""What a webhook says: an event's standard JSON, and the same event as a Slack message.

The outbox keeps each event's *standard* form (:func:`event_json`), made in
the transaction that changed the request: ``{"type", "timestamp", "data"}``,
where ``data`` is the request as it then was, arguments exactly as stored (the
adapter has already replaced redacted values by markers, which stay as they
are). What is sent is made from it at delivery time (:func:`render_body`): the
standard form with the review page's link, or a Slack message. Neither ever
holds a credential, a session, a token or a webhook secret: the request row's
owner and the reviewer's credential id are not in it, only the reviewer's name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from approval_guard._codec.display import escape, pointer, with_markers_shown
from approval_guard._codec.duration import format_time_left
from approval_guard._codec.exact_json import canonical_json, dump_json
from approval_guard._codec.wire import format_timestamp, parse_timestamp
from approval_guard.provider.channels.base import AGENT_SAYS
from approval_guard.provider.channels.public_url import public_link
from approval_guard.provider.store.models import StoredRequest

#: Event types, by the audit-trail kind that makes them.
EVENT_TYPES = {
    "created": "request.created",
    "decided": "request.decided",
    "expired": "request.expired",
    "cancelled": "request.cancelled",
}
#: A Slack message shows at most this many arguments, each cut to this many characters.
SLACK_MAX_ARGUMENTS = 20
SLACK_MAX_VALUE = 200
#: The most of an agent's stated reason a Slack message shows (escaped, it fits a section).
SLACK_MAX_SAID = 500


def event_json(
    kind: str, at: datetime, request: StoredRequest, *, decided_by: str | None
) -> dict[str, Any]:
    """An event's standard form: ``{"type", "timestamp", "data": {...the request...}}``."""
    data: dict[str, Any] = {
        "id": request.id,
        "tool": request.tool,
        "status": request.status,
        "arguments": request.arguments,
        "created_at": format_timestamp(request.created_at),
        "deadline_at": format_timestamp(request.deadline_at),
        "requested_by": request.requested_by,
        "approvals_required": request.approvals_required,
        "approvals": [{"by": one.by, "at": format_timestamp(one.at)} for one in request.approvals],
        "decision": None,
    }
    if request.redacted:
        data["redacted"] = list(request.redacted)  # API 1.3: which markers are redactions
    decision = request.decision
    if decision is not None:
        shown: dict[str, Any] = {
            "status": decision.status,
            "note": decision.note,
            "decided_at": format_timestamp(decision.decided_at),
            "expires_at": (
                None if decision.expires_at is None else format_timestamp(decision.expires_at)
            ),
        }
        if decided_by is not None:
            shown["decided_by"] = decided_by
        if decision.arguments is not None:
            shown["arguments"] = decision.arguments
        if request.decision_grant is not None:
            # API 1.3: the standing grant that decided it as it was made.
            shown["grant"] = request.decision_grant
        data["decision"] = shown
    if request.cancelled_at is not None:
        data["cancelled_at"] = format_timestamp(request.cancelled_at)
    # API 1.3, only when the create gave them: the agent's turn and its stated reason.
    if request.batch is not None:
        data["batch"] = request.batch
    if request.context is not None:
        data["context"] = request.context
    return {"type": EVENT_TYPES[kind], "timestamp": format_timestamp(at), "data": data}


def request_link(public_url: str | None, request_id: str) -> str | None:
    """The review page opened at one request, or None without a public URL."""
    if not public_url:
        return None
    return public_link(public_url, f"/?request={quote(request_id, safe='')}")


def standard_payload(event: dict[str, Any], *, public_url: str | None) -> dict[str, Any]:
    """The standard body: the stored event, with ``data.url`` when a public URL is known."""
    data = dict(event["data"])
    link = request_link(public_url, str(data.get("id", "")))
    if link is not None:
        data["url"] = link
    return {**event, "data": data}


def _mrkdwn(text: str) -> str:
    """Text Slack shows as it is: hidden characters escaped, ``&<>`` as entities (no links)."""
    return escape(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _value_text(value: Any, redacted: list[str], at: str) -> str:
    """One argument as a reviewer reads it: redactions shown as markers, JSON otherwise."""
    if isinstance(value, str):
        return value
    return dump_json(with_markers_shown(value, redacted, at=at))


def who_must_approve(approvers: list[str] | None, required: object = 1) -> str:
    """Who must approve, as the Slack text says it.

    ``"any reviewer may approve"``, ``"alice, bob may approve"`` or
    ``"2 approvals from: payments"``.

    ``approvers`` are the names or roles that may decide (None: every reviewer);
    ``required`` the distinct approvals the request needs (the event's
    ``approvals_required``).
    """
    count = required if isinstance(required, int) and not isinstance(required, bool) else 1
    who = ", ".join(approvers) if approvers else "any reviewer"
    if count <= 1:
        return f"{who} may approve"
    return f"{count} approvals from: {who}"


def slack_payload(
    event: dict[str, Any],
    *,
    public_url: str | None,
    now: datetime,
    approvers: list[str] | None = None,
) -> dict[str, Any]:
    """The event as a Slack message: ``{"text": one line, "blocks": [...]}``.

    Shows the tool, the agent's stated reason (API 1.3's ``context``, labelled,
    cut to :data:`SLACK_MAX_SAID` characters), the arguments (at most
    :data:`SLACK_MAX_ARGUMENTS`, each value cut to :data:`SLACK_MAX_VALUE`
    characters, redaction markers as markers), the time left until the deadline, who must approve
    (:func:`who_must_approve`: ``approvers``, else "any reviewer", and the
    event's ``approvals_required``) and a link to the request on the review page.
    """
    data = event["data"]
    tool = _mrkdwn(str(data.get("tool", "")))
    status = str(data.get("status", ""))
    kind = event.get("type", "")
    deadline = parse_timestamp(data.get("deadline_at"), field="deadline_at")
    left = format_time_left((deadline - now).total_seconds())
    decision = data.get("decision") or {}
    who = _mrkdwn(who_must_approve(approvers, data.get("approvals_required", 1)))
    if kind == "request.created":
        line = f"Approval needed: {tool} ({left}; {who})"
    elif kind == "request.decided":
        by = decision.get("decided_by")
        grant = decision.get("grant")
        if isinstance(grant, dict) and grant.get("id") and by:
            # A standing grant decided it as it was made: nobody clicked just now.
            by = f"grant {grant['id']} of {by}"
        line = f"{tool} was {_mrkdwn(status)}" + (f" by {_mrkdwn(str(by))}" if by else "")
    else:
        line = f"{tool}: {_mrkdwn(status)}"

    arguments = data.get("arguments")
    said = data.get("redacted")
    redacted = [path for path in said if isinstance(path, str)] if isinstance(said, list) else []
    items = list(arguments.items()) if isinstance(arguments, dict) else [("arguments", arguments)]
    shown = items[:SLACK_MAX_ARGUMENTS]
    lines = []
    for name, value in shown:
        value_text = _cut(_value_text(value, redacted, pointer((name,))), SLACK_MAX_VALUE)
        lines.append(f"*{_mrkdwn(_cut(str(name), 80))}*: `{_mrkdwn(value_text)}`")
    if len(items) > len(shown):
        lines.append(f"\u2026 and {len(items) - len(shown)} more")
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": line}}]
    context = data.get("context")
    if isinstance(context, str) and context:
        # The agent's own words, above the arguments, inert: entities in a code block.
        said = _mrkdwn(_cut(context, SLACK_MAX_SAID)).replace("`", "\u02cb")
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{AGENT_SAYS}*\n```{said}```"}}
        )
    blocks.append(
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": "\n".join(lines) or "_no arguments_"},
        }
    )
    context = [f"Request `{_mrkdwn(str(data.get('id', '')))}`", f"status: {_mrkdwn(status)}"]
    if status == "pending":
        context += [left, who]
    if decision.get("note"):
        context.append(f"note: {_mrkdwn(_cut(str(decision['note']), SLACK_MAX_VALUE))}")
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": " \u00b7 ".join(context)}]}
    )
    link = request_link(public_url, str(data.get("id", "")))
    if link is not None:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open on the review page"},
                        "url": link,
                    }
                ],
            }
        )
        line += f" <{link}|review>"
    return {"text": line, "blocks": blocks}


def render_body(
    event: dict[str, Any],
    *,
    format: str,
    public_url: str | None,
    now: datetime,
    approvers: list[str] | None = None,
) -> bytes:
    """The bytes one delivery posts (the same JSON codec as the API: exact numbers)."""
    if format == "slack":
        body = slack_payload(event, public_url=public_url, now=now, approvers=approvers)
    else:
        body = standard_payload(event, public_url=public_url)
    return canonical_json(body).encode("utf-8")
