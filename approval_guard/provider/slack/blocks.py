"""A request as Slack Block Kit: the channel message, and the Deny and Edit modals.

Pure functions of the request as it is now (never of an old event), so an
update delivered late, twice or after a restart shows the current state.
Everything a model or a person wrote (tool, arguments, names, notes) is shown
as text: hidden characters escaped as on the page, ``&``, ``<`` and ``>`` as
entities (so no ``<!channel>`` ping and no disguised link), values as exact
JSON in code spans (a redaction marker as the page shows it), each cut to
:data:`MAX_VALUE` characters, at most :data:`MAX_ARGUMENTS` of them.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from approval_guard._codec.display import escape, pointer, with_markers_shown
from approval_guard._codec.duration import format_time_left
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import (
    APPROVED,
    CANCELLED,
    DENIED,
    EXPIRED,
    PENDING,
    epoch_second,
    format_timestamp,
)
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.store.models import StoredRequest
from approval_guard.provider.webhooks.payloads import (
    SLACK_MAX_ARGUMENTS,
    SLACK_MAX_VALUE,
    request_link,
    who_must_approve,
)

MAX_ARGUMENTS = SLACK_MAX_ARGUMENTS
MAX_VALUE = SLACK_MAX_VALUE
#: The buttons' ``action_id`` s, and the modals' ``callback_id`` s.
APPROVE, DENY, EDIT = "ag_approve", "ag_deny", "ag_edit"
#: A modal's reason and note: the API's own limit would not fit a Slack input.
MAX_INPUT = 3000
#: Editable arguments a modal shows at most (a modal holds 100 blocks).
MAX_EDIT_INPUTS = 90


def text(value: str) -> str:
    """Text for a ``mrkdwn`` field, shown as it is: hidden characters escaped, ``&<>`` entities."""
    return escape(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(value: str, limit: int = MAX_VALUE) -> str:
    """Text in a code span: cut to ``limit``; a backtick (which would end it) as U+02CB."""
    if len(value) > limit:
        value = value[: limit - 1] + "\u2026"
    return "`" + text(value).replace("`", "\u02cb") + "`"


def plain(value: str, limit: int) -> str:
    """A ``plain_text`` field (Slack shows it literally): hidden characters escaped, cut."""
    shown = escape(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


def json_text(value: Any, redacted: tuple[str, ...] = (), *, at: str = "") -> str:
    """An argument's value as a reviewer reads it: exact JSON, redactions as markers.

    ``redacted`` and ``at``: which markers the create said are redactions (see
    :func:`~approval_guard._codec.display.with_markers_shown`).
    """
    return dump_json(with_markers_shown(value, redacted, at=at))


def when(moment: datetime) -> str:
    """A time Slack shows in each reader's own zone, with the UTC time as the fallback."""
    stamp = format_timestamp(moment)
    return f"<!date^{epoch_second(moment)}^{{date_short_pretty}} {{time_secs}}|{stamp}>"


def _section(markdown: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": markdown[:3000]}}


def _argument_blocks(request: StoredRequest) -> list[dict[str, Any]]:
    items = list(request.arguments.items())
    shown = items[:MAX_ARGUMENTS]
    blocks = [
        _section(
            f"{code(str(name), 80)}: "
            f"{code(json_text(value, request.redacted, at=pointer((name,))))}"
        )
        for name, value in shown
    ]
    if len(items) > len(shown):
        blocks.append(_section(f"\u2026 and {len(items) - len(shown)} more arguments"))
    return blocks or [_section("_no arguments_")]


def headline(request: StoredRequest) -> str:
    """The message's first line (also its notification text)."""
    tool = code(request.tool, 200)
    decision = request.decision
    by = text(decision.decided_by) if decision is not None and decision.decided_by else ""
    if request.status == PENDING:
        return f"*Approval needed:* {tool}"
    if request.status == APPROVED:
        return f"\u2705 *Approved:* {tool}" + (f" by {by}" if by else "")
    if request.status == DENIED:
        return f"\u26d4 *Denied:* {tool}" + (f" by {by}" if by else "")
    if request.status == EXPIRED:
        return f"\u231b *Expired:* {tool} (nobody decided in time)"
    if request.status == CANCELLED:
        return f"*Cancelled:* {tool} (the agent withdrew it)"
    return f"{tool}: {text(request.status)}"


def _outcome(request: StoredRequest, cancel_reason: str | None) -> str:
    decision = request.decision
    if decision is not None:
        parts = [
            f"{'Approved' if decision.status == APPROVED else 'Denied'} {when(decision.decided_at)}"
        ]
        if decision.expires_at is not None:
            parts.append(f"the call may start until {when(decision.expires_at)}")
        if decision.arguments is not None:
            parts.append("with edited arguments")
        line = ", ".join(parts)
        if decision.note:
            line += f"\n>{text(decision.note[:MAX_VALUE])}"
        return line
    if request.status == EXPIRED:
        return f"This request is no longer pending: it expired at {when(request.deadline_at)}."
    if request.status == CANCELLED and request.cancelled_at is not None:
        line = f"This request is no longer pending: it was cancelled {when(request.cancelled_at)}."
        return line + (f"\n>{code(cancel_reason)}" if cancel_reason else "")  # the agent's
    return f"This request is {text(request.status)}."


def approvals_line(request: StoredRequest) -> str:
    """``"1 of 2: alice"``: who has approved so far of how many."""
    names = ", ".join(text(one.by) for one in request.approvals)
    return f"{len(request.approvals)} of {request.approvals_required}: {names}"


def may_edit(request: StoredRequest) -> bool:
    """Whether the message offers "Edit and approve…" (as the store allows edits)."""
    return bool(request.editable) and request.approvals_required <= 1


def message(
    request: StoredRequest,
    *,
    rule: ToolRule,
    now: datetime,
    public_url: str | None = None,
    cancel_reason: str | None = None,
) -> dict[str, Any]:
    """``{"text", "blocks"}`` of the request's message in the channel, as it is now."""
    who = who_must_approve(
        list(rule.approvers) if rule.approvers else None, request.approvals_required
    )
    context = []
    if request.requested_by:
        context.append(f"asked by {code(request.requested_by, 200)}")  # the agent wrote it
    if request.status == PENDING:
        left = format_time_left((request.deadline_at - now).total_seconds())
        context += [f"{left} (until {when(request.deadline_at)})", text(who)]
    context.append(f"request {code(request.id, 80)}")
    link = request_link(public_url, request.id)
    if link is not None:
        context.append(f"<{link}|open on the review page>")
    blocks = [_section(headline(request)), *_argument_blocks(request)]
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": " \u00b7 ".join(context)}]}
    )
    if request.approvals and request.status == PENDING:
        blocks.append(_section(approvals_line(request)))
    if request.status == PENDING:
        buttons: list[dict[str, Any]] = [
            _button("Approve", APPROVE, request.id, "primary"),
            _button("Deny\u2026", DENY, request.id, "danger"),
        ]
        if may_edit(request):
            buttons.append(_button("Edit and approve\u2026", EDIT, request.id))
        blocks.append({"type": "actions", "block_id": "ag_actions", "elements": buttons})
    else:
        if request.approvals and request.approvals_required > 1:
            blocks.append(_section(approvals_line(request)))
        blocks.append(_section(_outcome(request, cancel_reason)))
    fallback = (
        f"{headline(request)} ({text(who)})" if request.status == PENDING else headline(request)
    )
    return {"text": fallback, "blocks": blocks}


def _button(label: str, action: str, request_id: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action,
        "text": {"type": "plain_text", "text": label},
        "value": request_id,
    }
    if style is not None:
        button["style"] = style
    return button


def _metadata(request: StoredRequest, channel: str | None) -> str:
    return json.dumps({"request": request.id, "channel": channel}, separators=(",", ":"))


def deny_modal(request: StoredRequest, channel: str | None) -> dict[str, Any]:
    """The "Deny…" modal: one required input for the reason (the agent receives it)."""
    return {
        "type": "modal",
        "callback_id": DENY,
        "private_metadata": _metadata(request, channel),
        "title": {"type": "plain_text", "text": "Deny the request"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            _section(f"Deny {code(request.tool, 200)} (request {code(request.id, 80)})?"),
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Why not? The agent receives it."},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "reason",
                    "multiline": True,
                    "max_length": MAX_INPUT,
                },
            },
        ],
    }


def edit_modal(request: StoredRequest, channel: str | None) -> dict[str, Any]:
    """The "Edit and approve…" modal: one input per editable argument, its JSON text filled in.

    Block ``arg<i>`` is the ``i``-th of the request's (sorted) editable names;
    what is typed is parsed as the page and the CLI parse it (exact JSON).
    """
    blocks: list[dict[str, Any]] = [
        _section(f"Approve {code(request.tool, 200)} with these values (JSON: text in quotes).")
    ]
    for index, name in enumerate(request.editable[:MAX_EDIT_INPUTS]):
        current = dump_json(request.arguments[name])
        element: dict[str, Any] = {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": len(current) > 60,
            "max_length": MAX_INPUT,
        }
        if len(current) <= MAX_INPUT:
            element["initial_value"] = current
        blocks.append(
            {
                "type": "input",
                "block_id": f"arg{index}",
                # Optional: an input left empty keeps the value (one too long to fill in, too).
                "optional": True,
                "label": {"type": "plain_text", "text": plain(name, 200)},
                "element": element,
            }
        )
    blocks.append(
        {
            "type": "input",
            "block_id": "note",
            "optional": True,
            "label": {"type": "plain_text", "text": "Note (optional)"},
            "element": {"type": "plain_text_input", "action_id": "note", "max_length": MAX_INPUT},
        }
    )
    return {
        "type": "modal",
        "callback_id": EDIT,
        "private_metadata": _metadata(request, channel),
        "title": {"type": "plain_text", "text": "Edit and approve"},
        "submit": {"type": "plain_text", "text": "Approve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }
