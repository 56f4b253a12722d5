"""The notification: the call as the review page shows it, cut to fit, with two buttons."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from approval_guard.provider.channels.ntfy import message
from approval_guard.provider.http.render import listed_request_json
from approval_guard.provider.store.models import StoredRequest

NOW = datetime(2026, 9, 16, 12, 0, tzinfo=timezone.utc)
MARKER = {"$redacted": "0123456789ab"}


def _request(**fields: Any) -> StoredRequest:
    values: dict[str, Any] = {
        "id": "r1",
        "tool": "issue_refund",
        "arguments": {"amount": 4900},
        "timeout": "30m",
        "status": "pending",
        "created_at": NOW,
        "deadline_at": NOW + timedelta(minutes=30),
        **fields,
    }
    return StoredRequest(**values)


def _publish(request: StoredRequest) -> dict[str, Any]:
    return message.publish(
        topic="alice-7f3k9q2w8e",
        request=request,
        display=listed_request_json(request)["display"],
        reviewer="alice",
        approve_url="https://host/approvals/ntfy/requests/r1/decision?token=A",
        deny_url="https://host/approvals/ntfy/requests/r1/decision?token=D",
        click="https://host/approvals/?request=r1",
    )


def test_it_shows_the_tool_the_reason_and_the_arguments() -> None:
    """Title names the tool; the text has who asks, the agent's reason, the arguments, the id."""
    body = _publish(
        _request(context="Refund for order 1234\nas promised", requested_by="carol@example.com")
    )
    assert body["topic"] == "alice-7f3k9q2w8e" and body["title"] == "Approval needed: issue_refund"
    text = body["message"]
    assert "carol@example.com (through an agent) asks to run issue_refund." in text
    assert "The agent says:\n> Refund for order 1234\n> as promised" in text
    assert '"amount": 4900' in text and "request r1" in text and "For alice only" in text
    assert text.index("The agent says") < text.index("Arguments:")
    assert body["click"] == "https://host/approvals/?request=r1"


def test_two_http_buttons_post_and_clear() -> None:
    """Approve and Deny are ``http`` actions that POST to their URLs and clear the notification."""
    actions = _publish(_request())["actions"]
    assert [(one["action"], one["label"], one["method"], one["clear"]) for one in actions] == [
        ("http", "Approve", "POST", True),
        ("http", "Deny", "POST", True),
    ]
    assert actions[0]["url"].endswith("token=A") and actions[1]["url"].endswith("token=D")


def test_a_redaction_is_shown_only_where_the_guard_redacted() -> None:
    """A marker at a redacted path reads as a redaction; one the client sent is shown as JSON."""
    request = _request(
        arguments={"card": MARKER, "memo": MARKER}, redacted=("/card",), requested_by=None
    )
    text = _publish(request)["message"]
    assert "\u2039redacted 0123456789ab\u203a" in text
    assert '"memo": {\n    "$redacted": "0123456789ab"\n  }' in text
    assert "Hidden from you by the guard (redacted): card" in text


def test_hidden_characters_are_escaped() -> None:
    """A bidi override or zero-width space in the tool or arguments is shown as \\uXXXX."""
    body = _publish(_request(tool="pay\u202eusd", arguments={"to": "bob\u200b"}))
    assert "\u202e" not in body["title"] + body["message"]
    assert "pay\\u202eusd" in body["title"] and "bob\\u200b" in body["message"]


def test_the_whole_json_fits_too_when_escapes_double_it() -> None:
    """Quotes, backslashes and line breaks count twice in JSON: the publish stays under 8 KiB."""
    request = _request(arguments={"q": '"' * 3000}, context='"\\' * 450)
    body = _publish(request)
    assert len(message.encoded(body)) <= message.MAX_JSON_BYTES
    assert "cut to fit the notification" in body["message"]
    assert body["message"].endswith("(request r1).")


def test_huge_arguments_are_cut_to_fit_and_say_so() -> None:
    """Arguments beyond 4,096 bytes are cut (multi-byte text too), the end of the text kept."""
    request = _request(arguments={"text": "\u00e9\u4e2d" * 5000}, context="why " * 250)
    text = _publish(request)["message"]
    assert len(text.encode("utf-8")) <= message.MAX_MESSAGE_BYTES
    assert "cut to fit the notification" in text
    assert text.endswith("(request r1).") and "The agent says:" in text


def test_the_ended_notice_has_no_buttons() -> None:
    """Once decided, the short notice says how and by whom, and carries no action."""
    notice = message.ended(
        topic="alice-7f3k9q2w8e", request=_request(status="approved"), decided_by="bob"
    )
    assert notice["title"] == "Approved: issue_refund" and "actions" not in notice
    assert notice["message"].startswith("Approved by bob: issue_refund (request r1).")
