"""The HTML preview of a Slack message (the docs' picture): every block shown, nothing injected."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from approval_guard.provider.channels.slack.blocks import message
from approval_guard.provider.channels.slack.preview import mrkdwn_html, preview_html, sample_message
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.store.models import StoredRequest

NOW = datetime(2026, 9, 16, 12, 0, tzinfo=timezone.utc)


def _request(**fields: object) -> StoredRequest:
    values: dict = {
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


def test_the_preview_shows_every_block_in_order() -> None:
    """One element per block, of its type, in the message's order."""
    body = sample_message()
    page = preview_html(body)
    shown = re.findall(r'data-block="(\d+)" data-block-type="(\w+)"', page)
    assert [(str(n), block["type"]) for n, block in enumerate(body["blocks"])] == shown
    for label in ("Approve", "Deny\u2026"):
        assert f">{label}</span>" in page
    assert "1 of 2: alice" in page and "2 approvals from: payments" in page


def test_text_from_a_model_never_becomes_markup_in_the_preview() -> None:
    """An argument holding HTML or Slack link markup is shown as text, not as a tag or a link."""
    hostile = {"note": "<script>alert(1)</script> <https://evil.example|bank> *bold*"}
    page = preview_html(message(_request(arguments=hostile), rule=ToolRule(), now=NOW))
    assert "<script>" not in page and 'href="https://evil' not in page
    assert "&lt;script&gt;" in page


def test_mrkdwn_renders_slacks_own_markup() -> None:
    """Bold, code spans, quotes, links and dates render as Slack renders them."""
    shown = mrkdwn_html(
        "*Approved:* `x`\n>a note\n<https://a.example/|link> <!date^1^{time}|12:00>"
    )
    assert "<b>Approved:</b> <code>x</code>" in shown
    assert "<blockquote>a note</blockquote>" in shown
    assert '<a href="https://a.example/">link</a> 12:00' in shown


def test_a_decided_request_renders_without_buttons() -> None:
    """Once approved, the preview (as the message) has no buttons left."""
    from approval_guard._codec.wire_models import Decision

    decided = _request(
        status="approved",
        decision=Decision(
            status="approved", note="ok", decided_at=NOW, expires_at=NOW, decided_by="bob"
        ),
    )
    page = preview_html(message(decided, rule=ToolRule(), now=NOW))
    assert "data-action" not in page
    assert "Approved:" in page and "by bob" in page
