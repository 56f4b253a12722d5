"""The mail about one new request: the call as the review page shows it, and two links.

Plain text with an HTML alternative (every value escaped for HTML, hidden
characters already shown as ``\\uXXXX`` by the page's own display texts, so
a mail shows exactly what the page shows, redaction markers included). The
links only open a confirmation page: the mail says so.
"""

from __future__ import annotations

import html
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any

from approval_guard._codec.display import escape
from approval_guard._codec.wire import format_timestamp
from approval_guard.provider.channels.base import AGENT_SAYS
from approval_guard.provider.store.models import StoredRequest

#: The longest tool name a subject shows.
_SUBJECT_TOOL = 80


def _lines(request: StoredRequest, display: dict[str, Any], reviewer: str) -> list[str]:
    asked = (
        f"{escape(request.requested_by)} (through an agent) asks"
        if request.requested_by is not None
        else "An agent asks"
    )
    out = [f"{asked} to run {display['tool']}.", ""]
    if display.get("context") is not None:
        # The agent's own words (API 1.3), above the arguments, each line quoted.
        out += [AGENT_SAYS, *(f"> {line}" for line in display["context"].split("\n")), ""]
    out += ["Arguments:", display["arguments"]]
    if display.get("redacted"):
        out += ["", "Hidden from you by the guard (redacted): " + ", ".join(display["redacted"])]
    if display.get("approvals"):
        out += ["", f"Approvals so far: {display['approvals']}"]
    out += [
        "",
        f"Decide before {format_timestamp(request.deadline_at)} (request {request.id}).",
        f"These links are for {escape(reviewer)} only. Opening one decides nothing: it shows "
        "this call again and asks you to confirm. Each mail's links decide once.",
    ]
    return out


def compose(
    *,
    request: StoredRequest,
    display: dict[str, Any],
    reviewer: str,
    sender: str,
    recipient: str,
    approve_url: str,
    deny_url: str,
) -> EmailMessage:
    """The message for one reviewer; ``display`` is the request's page display texts."""
    message = EmailMessage()
    tool = display["tool"]
    if len(tool) > _SUBJECT_TOOL:
        tool = tool[: _SUBJECT_TOOL - 1] + "\u2026"
    message["Subject"] = f"Approval needed: {tool}"
    message["From"] = Address(addr_spec=sender)
    message["To"] = Address(addr_spec=recipient)
    message["Date"] = format_datetime(request.created_at)
    message["Message-ID"] = make_msgid(domain=sender.rsplit("@", 1)[1])
    message["Auto-Submitted"] = "auto-generated"
    message["X-Approval-Guard-Request"] = request.id
    lines = _lines(request, display, reviewer)
    text = [*lines, "", f"Approve: {approve_url}", f"Deny: {deny_url}", ""]
    message.set_content("\n".join(text))
    arguments = lines.index(display["arguments"])
    body = [f"<p>{html.escape(line)}</p>" for line in lines[:arguments] if line]
    body.append(f"<pre>{html.escape(display['arguments'])}</pre>")
    body += [f"<p>{html.escape(line)}</p>" for line in lines[arguments + 1 :] if line]
    body.append(
        f'<p><a href="{html.escape(approve_url)}">Approve</a> &middot; '
        f'<a href="{html.escape(deny_url)}">Deny</a></p>'
    )
    message.add_alternative(
        "<!doctype html><html><body>" + "\n".join(body) + "</body></html>\n", subtype="html"
    )
    return message
