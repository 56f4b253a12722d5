"""A request as a Discord message: its text, embed and buttons; the Deny modal; the replies.

Pure functions of the request as it is now (never of an old event), so an
edit delivered late, twice or after a restart shows the current state.
Everything a model or a person wrote (tool, arguments, names, notes, the
agent's reason) is shown inert: in code spans or a code block (no markdown, no
mention, no link), hidden characters escaped as on the page, a backtick as
U+02CB, each cut to fit Discord's limits (2,000 characters of content; an
embed's 4,096 of description, 25 fields of 1,024, 6,000 in all), with
``allowed_mentions`` empty so nothing pings anyone. Values are exact JSON, a
redaction shown as the page shows it only where the create said it redacted.
Buttons are there while the request is pending, and gone once it is not.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import quote

from approval_guard._codec.display import escape, escape_lines, pointer, with_markers_shown
from approval_guard._codec.duration import format_time_left
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import APPROVED, CANCELLED, DENIED, EXPIRED, PENDING, epoch_second
from approval_guard.provider.channels.base import AGENT_SAYS
from approval_guard.provider.channels.public_url import public_link
from approval_guard.provider.store.models import StoredRequest

#: The buttons' and the modal's ``custom_id`` s: ``ACTION:REQUEST_ID``.
APPROVE, DENY, DENY_REASON = "ag_approve", "ag_deny", "ag_deny_reason"
#: The modal's text input's ``custom_id``.
REASON = "reason"
#: Interaction response types (Discord's ``InteractionCallbackType``).
PONG, CHANNEL_MESSAGE, UPDATE_MESSAGE, MODAL = 1, 4, 7, 9
#: Message flag: only the person who clicked sees the reply.
EPHEMERAL = 64
#: Component types: an action row, a button, a text input; button styles.
ACTION_ROW, BUTTON, TEXT_INPUT = 1, 2, 4
SUCCESS, DANGER = 3, 4

#: Discord's limits, and what this message spends of them.
MAX_CONTENT = 2000
MAX_ARGUMENTS = 10
MAX_NAME = 80
MAX_VALUE = 350
MAX_SAID = 1200
MAX_NOTE = 900
#: The reason a reviewer may type (the modal's input; Discord allows 4,000).
MAX_REASON = 1000
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,80}")
_COLOURS = {PENDING: 0xF1C40F, APPROVED: 0x2ECC71, DENIED: 0xE74C3C}
_GREY = 0x95A5A6


def code(value: str, limit: int = MAX_VALUE) -> str:
    """``value`` in a code span, shown as it is: hidden characters escaped, cut to ``limit``."""
    shown = escape(value).replace("`", "\u02cb")
    if len(shown) > limit:
        shown = shown[: limit - 1] + "\u2026"
    return "`" + (shown or " ") + "`"


def block(value: str, limit: int) -> str:
    """``value`` in a code block (its lines kept, hidden characters escaped), cut to ``limit``."""
    shown = escape_lines(value.replace("\r\n", "\n")).replace("`", "\u02cb")
    if len(shown) > limit:
        shown = shown[: limit - 1] + "\u2026"
    return "```\n" + shown + "\n```"


def when(moment: datetime) -> str:
    """A time Discord shows in each reader's own zone (``<t:EPOCH:f>``)."""
    return f"<t:{epoch_second(moment)}:f>"


def headline(request: StoredRequest) -> str:
    """The message's first line: what is asked, or how it ended and by whom."""
    tool = code(request.tool, 200)
    decision = request.decision
    by = f" by {code(decision.decided_by, 200)}" if decision and decision.decided_by else ""
    if request.status == PENDING:
        return f"**Approval needed:** {tool}"
    if request.status == APPROVED:
        return f"\u2705 **Approved:** {tool}{by}"
    if request.status == DENIED:
        return f"\u26d4 **Denied:** {tool}{by}"
    if request.status == EXPIRED:
        return f"\u231b **Expired:** {tool} (nobody decided in time)"
    if request.status == CANCELLED:
        return f"**Cancelled:** {tool} (the agent withdrew it)"
    return f"{tool}: {code(request.status, 40)}"


def who_must_approve(approvers: list[str] | None, required: int) -> str:
    """``"any reviewer may approve"``, ``"payments may approve"``, ``"2 approvals from: ..."``."""
    who = ", ".join(approvers) if approvers else "any reviewer"
    if required <= 1:
        return f"{who} may approve"
    return f"{required} approvals from: {who}"


def approvals_line(request: StoredRequest) -> str:
    """``"Approved so far: 1 of 2 (`alice`)"``."""
    names = ", ".join(code(one.by, 100) for one in request.approvals)
    return f"Approved so far: {len(request.approvals)} of {request.approvals_required} ({names})"


def _outcome(request: StoredRequest) -> list[str]:
    decision = request.decision
    if decision is not None:
        verb = "Approved" if decision.status == APPROVED else "Denied"
        line = f"{verb} {when(decision.decided_at)}"
        if decision.expires_at is not None:
            line += f"; the call may start until {when(decision.expires_at)}"
        if decision.arguments is not None:
            line += ", with edited arguments"
        lines = [line]
        if decision.note:
            lines.append(f"Note: {code(decision.note, MAX_NOTE)}")
        return lines
    if request.status == EXPIRED:
        return [f"No longer pending: it expired {when(request.deadline_at)}."]
    if request.status == CANCELLED and request.cancelled_at is not None:
        return [f"No longer pending: it was cancelled {when(request.cancelled_at)}."]
    return [f"This request is {code(request.status, 40)}."]


def _content(
    request: StoredRequest, approvers: list[str] | None, now: datetime, link: str | None
) -> str:
    lines = [headline(request)]
    facts = []
    if request.requested_by:
        facts.append(f"asked by {code(request.requested_by, 200)}")
    if request.status == PENDING:
        left = format_time_left((request.deadline_at - now).total_seconds())
        facts.append(f"{left} (until {when(request.deadline_at)})")
        facts.append(code(who_must_approve(approvers, request.approvals_required), 300))
    facts.append(f"request {code(request.id, 80)}")
    lines.append(" \u00b7 ".join(facts))
    if request.approvals and (request.status == PENDING or request.approvals_required > 1):
        lines.append(approvals_line(request))
    if request.status != PENDING:
        lines += _outcome(request)
    if link is not None:
        lines.append(f"Review page: <{link}>")
    content = "\n".join(lines)
    return content if len(content) <= MAX_CONTENT else content[: MAX_CONTENT - 1] + "\u2026"


def _embed(request: StoredRequest) -> dict[str, Any]:
    embed: dict[str, Any] = {"color": _COLOURS.get(request.status, _GREY)}
    if request.context:
        embed["description"] = f"**{AGENT_SAYS}**\n{block(request.context, MAX_SAID)}"
    items = list(request.arguments.items())
    fields = [
        {
            "name": code(str(name), MAX_NAME),
            "value": code(
                dump_json(with_markers_shown(value, request.redacted, at=pointer((str(name),)))),
                MAX_VALUE,
            ),
        }
        for name, value in items[:MAX_ARGUMENTS]
    ]
    if len(items) > MAX_ARGUMENTS:
        fields.append(
            {"name": "\u2026", "value": f"and {len(items) - MAX_ARGUMENTS} more arguments"}
        )
    embed["fields"] = fields or [{"name": "Arguments", "value": "none"}]
    return embed


def custom_id(action: str, request_id: str) -> str:
    """A button's or the modal's ``custom_id``: ``ag_approve:REQUEST_ID``."""
    return f"{action}:{request_id}"


def parse_custom_id(value: object) -> tuple[str, str] | None:
    """``(action, request_id)`` of a ``custom_id`` this provider made, or None."""
    if not isinstance(value, str):
        return None
    action, sep, request_id = value.partition(":")
    if not sep or action not in (APPROVE, DENY, DENY_REASON) or not _ID.fullmatch(request_id):
        return None
    return action, request_id


def buttons(request: StoredRequest) -> list[dict[str, Any]]:
    """The message's components: Approve / Deny… while pending, none once it is not."""
    if request.status != PENDING:
        return []
    return [
        {
            "type": ACTION_ROW,
            "components": [
                {
                    "type": BUTTON,
                    "style": SUCCESS,
                    "label": "Approve",
                    "custom_id": custom_id(APPROVE, request.id),
                },
                {
                    "type": BUTTON,
                    "style": DANGER,
                    "label": "Deny\u2026",
                    "custom_id": custom_id(DENY, request.id),
                },
            ],
        }
    ]


def message(
    request: StoredRequest,
    *,
    now: datetime,
    approvers: list[str] | None = None,
    public_url: str | None = None,
) -> dict[str, Any]:
    """The message's body as Create / Edit Message take it, for the request as it is now.

    :param request: the request as the store has it now.
    :param now: the provider's clock (for the time left).
    :param approvers: who the tool's rule lets decide (None: any reviewer).
    :param public_url: the provider's public URL, for a link to the review page.
    """
    link = None
    if public_url:
        link = public_link(public_url, f"/?request={quote(request.id, safe='')}")
    return {
        "content": _content(request, approvers, now, link),
        "embeds": [_embed(request)],
        "components": buttons(request),
        "allowed_mentions": {"parse": []},
    }


def deny_modal(request: StoredRequest) -> dict[str, Any]:
    """The interaction response opening the modal that asks why (type 9, ``MODAL``)."""
    return {
        "type": MODAL,
        "data": {
            "custom_id": custom_id(DENY_REASON, request.id),
            "title": "Deny this request",
            "components": [
                {
                    "type": ACTION_ROW,
                    "components": [
                        {
                            "type": TEXT_INPUT,
                            "custom_id": REASON,
                            "style": 2,
                            "label": "Why? The agent receives it",
                            "min_length": 1,
                            "max_length": MAX_REASON,
                            "required": True,
                        }
                    ],
                }
            ],
        },
    }


def reply(text: str) -> dict[str, Any]:
    """An ephemeral reply (type 4, flags 64): only the person who clicked sees it."""
    return {
        "type": CHANNEL_MESSAGE,
        "data": {
            "content": text[:MAX_CONTENT],
            "flags": EPHEMERAL,
            "allowed_mentions": {"parse": []},
        },
    }


def updated(body: dict[str, Any]) -> dict[str, Any]:
    """The interaction response editing the clicked message to ``body`` (type 7)."""
    return {"type": UPDATE_MESSAGE, "data": body}


def submitted_text(data: dict[str, Any], field: str) -> str | None:
    """The text typed in a modal's input ``field``, in either shape Discord sends a submission.

    Inputs come in action rows (``{"type": 1, "components": [input]}``) or,
    in newer modals, in labels (``{"type": 18, "component": input}``).
    """
    rows = data.get("components")
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        inner = row.get("components")
        inputs = list(inner) if isinstance(inner, list) else []
        if isinstance(row.get("component"), dict):
            inputs.append(row["component"])
        for one in inputs:
            if isinstance(one, dict) and one.get("custom_id") == field:
                value = one.get("value")
                return value if isinstance(value, str) else None
    return None
