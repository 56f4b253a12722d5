"""A request as Slack Block Kit: the channel message with its buttons (the modals: modals.py).

Pure functions of the request as it is now (never of an old event), so an
update delivered late, twice or after a restart shows the current state.
Everything a model or a person wrote (tool, arguments, names, notes) is shown
as text: hidden characters escaped as on the page, ``&``, ``<`` and ``>`` as
entities (so no ``<!channel>`` ping and no disguised link), values as exact
JSON in code spans (a redaction marker as the page shows it), each cut to
:data:`MAX_VALUE` characters, at most :data:`MAX_ARGUMENTS` of them.
"""

from __future__ import annotations

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
from approval_guard.provider.channels.base import AGENT_SAYS
from approval_guard.provider.channels.webhooks.payloads import (
    SLACK_MAX_ARGUMENTS,
    SLACK_MAX_VALUE,
    request_link,
    who_must_approve,
)
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.rules.grant_words import (
    decided_through,
    default_duration,
)
from approval_guard.provider.store.models import StoredRequest

MAX_ARGUMENTS = SLACK_MAX_ARGUMENTS
MAX_VALUE = SLACK_MAX_VALUE
#: The buttons' ``action_id`` s, and the modals' ``callback_id`` s.
APPROVE, DENY, EDIT = "ag_approve", "ag_deny", "ag_edit"
#: A batch's buttons (API 1.3): their ``value`` lists the ids the message shows.
APPROVE_ALL, DENY_ALL = "ag_approve_all", "ag_deny_all"
#: The most of a batch's pending requests one message lists (and its buttons decide).
MAX_BATCH_SHOWN = 20
#: API 1.3: "Approve and allow for…": its button's ``action_id`` and its modal's ``callback_id``.
GRANT = "ag_grant"
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


def section(markdown: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": markdown[:3000]}}


#: The most of an agent's stated reason a section shows (a section holds 3,000 characters).
MAX_SAID = 2900


def said(context: str) -> str:
    """The agent's stated reason as a code block: inert (no ping, link or format), escaped.

    Cut to fit one section (entities make a hostile text up to five times longer).
    """
    shown = text(context).replace("`", "\u02cb")
    if len(shown) > MAX_SAID:
        shown = shown[: MAX_SAID - 1]
        amp = shown.rfind("&")
        if amp != -1 and ";" not in shown[amp:]:
            shown = shown[:amp]  # never half an entity
        shown += "\u2026"
    return "```" + shown + "```"


def context_block(request: StoredRequest) -> list[dict[str, Any]]:
    """The labelled section of the agent's stated reason (API 1.3), if it gave one."""
    if not request.context:
        return []
    return [section(f"*{AGENT_SAYS}*\n{said(request.context)}")]


def _argument_blocks(request: StoredRequest) -> list[dict[str, Any]]:
    items = list(request.arguments.items())
    shown = items[:MAX_ARGUMENTS]
    blocks = [
        section(
            f"{code(str(name), 80)}: "
            f"{code(json_text(value, request.redacted, at=pointer((name,))))}"
        )
        for name, value in shown
    ]
    if len(items) > len(shown):
        blocks.append(section(f"\u2026 and {len(items) - len(shown)} more arguments"))
    return blocks or [section("_no arguments_")]


def headline(request: StoredRequest, rule: ToolRule | None = None) -> str:
    """The message's first line (also its notification text); ``rule`` names rules."""
    tool = code(request.tool, 200)
    decision = request.decision
    by = text(decision.decided_by) if decision is not None and decision.decided_by else ""
    through = decided_through(request, rule)
    if through is not None:  # API 1.3: "by grant grant_1a2b of alice", "by rule NAME"
        by = text(through)
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


def batch_ids(value: object) -> list[str]:
    """The ids a batch button's ``value`` (or a modal's metadata) lists; [] for anything else."""
    if not isinstance(value, str) or not value:
        return []
    ids = value.split(",")
    if len(ids) > MAX_BATCH_SHOWN or len(set(ids)) != len(ids) or not all(ids):
        return []
    return ids


def _batch_blocks(request: StoredRequest, batch: list[StoredRequest]) -> list[dict[str, Any]]:
    """The batch's pending requests as the message lists them, and its two buttons.

    Only when this request is pending and has company: the buttons decide
    exactly the ids listed here, never a request that joined the batch later.
    """
    shown = batch[:MAX_BATCH_SHOWN]
    if request.status != PENDING or len(shown) < 2 or request.batch is None:
        return []
    lines = [f"*Batch {code(request.batch, 200)}:* {len(shown)} pending requests of this agent"]
    lines += [f"\u2022 {code(one.tool, 40)} {code(one.id, 80)}" for one in shown]
    if len(batch) > len(shown):
        lines.append(f"(the buttons decide these {len(shown)}; the others have their own)")
    value = ",".join(one.id for one in shown)
    count = len(shown)
    buttons = [
        _button(f"Approve all {count}", APPROVE_ALL, value, "primary"),
        _button(f"Deny all {count}\u2026", DENY_ALL, value, "danger"),
    ]
    return [
        section("\n".join(lines)),
        {"type": "actions", "block_id": "ag_batch", "elements": buttons},
    ]


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
    batch: list[StoredRequest] | None = None,
) -> dict[str, Any]:
    """``{"text", "blocks"}`` of the request's message in the channel, as it is now.

    ``batch``: the pending requests of its batch (API 1.3), oldest first; with
    two or more the message lists them under "Approve all N" / "Deny all N".
    """
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
    blocks = [
        section(headline(request, rule)),
        *context_block(request),
        *_argument_blocks(request),
    ]
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": " \u00b7 ".join(context)}]}
    )
    if request.approvals and request.status == PENDING:
        blocks.append(section(approvals_line(request)))
    if request.status == PENDING:
        buttons: list[dict[str, Any]] = [
            _button("Approve", APPROVE, request.id, "primary"),
            _button("Deny\u2026", DENY, request.id, "danger"),
        ]
        if may_edit(request):
            buttons.append(_button("Edit and approve\u2026", EDIT, request.id))
        if rule.grants:
            buttons.append(grant_button(request, rule))
        blocks.append({"type": "actions", "block_id": "ag_actions", "elements": buttons})
        blocks += _batch_blocks(request, batch or [])
    else:
        if request.approvals and request.approvals_required > 1:
            blocks.append(section(approvals_line(request)))
        blocks.append(section(_outcome(request, cancel_reason)))
    fallback = (
        f"{headline(request)} ({text(who)})"
        if request.status == PENDING
        else headline(request, rule)
    )
    return {"text": fallback, "blocks": blocks}


def _button(label: str, action: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action,
        "text": {"type": "plain_text", "text": label},
        "value": value,
    }
    if style is not None:
        button["style"] = style
    return button


def grant_button(request: StoredRequest, rule: ToolRule) -> dict[str, Any]:
    """API 1.3: "Approve and allow for 1h…", opening :func:`grant_modal`."""
    label = f"Approve and allow for {default_duration(rule.max_grant)}\u2026"
    return _button(label, GRANT, request.id)
