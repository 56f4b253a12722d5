"""What is published to a reviewer's topic: ntfy's JSON message, cut to fit, with two buttons.

The text shows the call as the review page does (the page's own display
texts: hidden characters already escaped, a guard's redaction marker shown as
``\u2039redacted 1a2b3c4d5e6f\u203a`` only where the create said it redacted
that place), plain text (never Markdown, so nothing the agent wrote formats or
links). ntfy keeps at most 4,096 bytes of a message; longer arguments (then
the agent's reason) are cut, saying so. The two ``http`` actions POST to the
provider's action URL, each carrying its signed single-use token; tapping the
notification itself opens the review page. After the request ends a short
notice (no buttons) says so: ntfy cannot edit or withdraw a sent message.
"""

from __future__ import annotations

from typing import Any

from approval_guard._codec.display import escape
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import format_timestamp
from approval_guard.provider.channels.base import AGENT_SAYS
from approval_guard.provider.store.models import StoredRequest

#: ntfy's limit on a message's body (longer ones become attachments, or are refused).
MAX_MESSAGE_BYTES = 4096
#: ntfy's limit on a JSON publish, all of it (twice the message's), less a margin.
MAX_JSON_BYTES = 2 * MAX_MESSAGE_BYTES - 192
#: The most of the agent's reason shown, so the arguments keep room.
MAX_CONTEXT_BYTES = 1200
#: The longest title, in characters (a notification shows one line of it).
MAX_TITLE = 120
#: The longest name (tool, person) in the text, in characters.
MAX_NAME = 200
_CUT = "\n\u2026 (cut to fit the notification: the review page shows it all)"


def cut(text: str, limit: int, mark: str = _CUT) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes, ending with ``mark`` when it was cut."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    room = max(0, limit - len(mark.encode("utf-8")))
    return raw[:room].decode("utf-8", errors="ignore") + mark


def _short(text: str, limit: int = MAX_NAME) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def title(display: dict[str, Any]) -> str:
    """``Approval needed: TOOL`` (the tool's display text, cut to a line)."""
    return _short(f"Approval needed: {display['tool']}", MAX_TITLE)


def body(
    request: StoredRequest, display: dict[str, Any], reviewer: str, limit: int = MAX_MESSAGE_BYTES
) -> str:
    """The text for ``reviewer``: the call, the agent's reason, the arguments, cut to fit."""
    tool = _short(display["tool"])
    asked = (
        f"{_short(escape(request.requested_by))} (through an agent) asks"
        if request.requested_by is not None
        else "An agent asks"
    )
    head = f"{asked} to run {tool}."
    tail: list[str] = []
    if display.get("redacted"):
        hidden = cut(", ".join(display["redacted"]), 400, "\u2026")
        tail.append(f"Hidden from you by the guard (redacted): {hidden}")
    if display.get("approvals"):
        tail.append(f"Approvals so far: {cut(display['approvals'], 400, '…')}")
    tail.append(
        f"For {_short(escape(reviewer))} only: Approve or Deny below decides at once, once. "
        f"Decide before {format_timestamp(request.deadline_at)} (request {_short(request.id)})."
    )
    fixed = "\n\n".join([head, *tail])
    said = ""
    if display.get("context") is not None:
        # The agent's own words (API 1.3), above the arguments, each line quoted.
        quoted = "\n".join(f"> {line}" for line in display["context"].split("\n"))
        said = f"{AGENT_SAYS}\n{cut(quoted, MAX_CONTEXT_BYTES)}"
    label = "Arguments:\n"
    seps = 2 * (2 if said else 1)  # the blank lines around the parts added below
    room = limit - len(fixed.encode()) - len(said.encode()) - len(label) - seps
    arguments = label + cut(display["arguments"], max(room, 0))
    parts = [head, *([said] if said else []), arguments, *tail]
    return cut("\n\n".join(parts), limit)


def actions(approve_url: str, deny_url: str) -> list[dict[str, Any]]:
    """The two buttons: each an ``http`` action the phone POSTs, cleared once it succeeded."""
    return [
        {"action": "http", "label": label, "url": url, "method": "POST", "clear": True}
        for label, url in (("Approve", approve_url), ("Deny", deny_url))
    ]


def publish(
    *,
    topic: str,
    request: StoredRequest,
    display: dict[str, Any],
    reviewer: str,
    approve_url: str,
    deny_url: str,
    click: str | None,
) -> dict[str, Any]:
    """The JSON published to ntfy's root for one reviewer's new request.

    Both of ntfy's limits hold: the message's 4,096 bytes, and the whole JSON's
    8,192 (escaped quotes and line breaks count twice there).
    """
    out: dict[str, Any] = {
        "topic": topic,
        "title": title(display),
        "tags": ["lock"],
        "priority": 4,
        "actions": actions(approve_url, deny_url),
    }
    if click is not None:
        out["click"] = click
    limit = MAX_MESSAGE_BYTES
    while True:
        out["message"] = body(request, display, reviewer, limit)
        over = len(encoded(out)) - MAX_JSON_BYTES
        if over <= 0 or limit <= 0:
            return out
        limit = max(0, limit - over - 16)


def encoded(message: dict[str, Any]) -> bytes:
    """A message as it is published (UTF-8 JSON)."""
    return dump_json(message).encode("utf-8")


#: A request's end, as the follow-up notice words it.
_ENDS = {
    "approved": "Approved",
    "denied": "Denied",
    "expired": "Expired",
    "cancelled": "Withdrawn by the agent",
}


def ended(*, topic: str, request: StoredRequest, decided_by: str | None) -> dict[str, Any]:
    """The short notice once a request is no longer pending (no buttons: nothing to decide)."""
    tool = _short(escape(request.tool))
    outcome = _ENDS.get(request.status, request.status)
    by = f" by {_short(escape(decided_by))}" if decided_by and request.status != "expired" else ""
    return {
        "topic": topic,
        "title": _short(f"{outcome}: {tool}", MAX_TITLE),
        "message": (
            f"{outcome}{by}: {tool} (request {_short(request.id)}). The buttons of the "
            "earlier notification decide nothing now."
        ),
        "tags": ["white_check_mark" if request.status == "approved" else "x"],
        "priority": 2,
    }
