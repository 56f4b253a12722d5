"""A request as a Discord message: inert text, Discord's limits, redactions, buttons if pending."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from approval_guard._codec.wire_models import Decision
from approval_guard.provider.channels.discord.message import (
    APPROVE,
    DENY,
    DENY_REASON,
    MAX_ARGUMENTS,
    deny_modal,
    message,
    parse_custom_id,
    reply,
    submitted_text,
)
from approval_guard.provider.store.models import Approval, StoredRequest

NOW = datetime(2026, 12, 5, 20, 0, tzinfo=timezone.utc)
ID = "5b0c8a3e-0d6c-4f53-9a51-0a4b9d6e2f10"


def request(**changes: Any) -> StoredRequest:
    base = StoredRequest(
        id=ID,
        tool="issue_refund",
        arguments={"payment_id": "payment_123", "amount": 4900},
        timeout="5m",
        status="pending",
        created_at=NOW,
        deadline_at=NOW + timedelta(minutes=5),
        requested_by="bob",
        context="The customer asked for a refund.",
    )
    return attrs.evolve(base, **changes)


def embed_length(embed: dict[str, Any]) -> int:
    fields = embed.get("fields", [])
    return len(embed.get("description", "")) + sum(
        len(one["name"]) + len(one["value"]) for one in fields
    )


def test_a_pending_request_has_its_tool_reason_arguments_and_two_buttons() -> None:
    """Approve and Deny… carry the request's id; the reason and arguments are in the embed."""
    body = message(request(), now=NOW, approvers=["payments"])
    assert body["content"].startswith("**Approval needed:** `issue_refund`")
    assert "`payments may approve`" in body["content"] and "5m 00s left" in body["content"]
    (embed,) = body["embeds"]
    assert "The customer asked for a refund." in embed["description"]
    assert [one["name"] for one in embed["fields"]] == ["`payment_id`", "`amount`"]
    assert [one["value"] for one in embed["fields"]] == ['`"payment_123"`', "`4900`"]
    (row,) = body["components"]
    assert row["type"] == 1
    assert [(b["type"], b["style"], b["label"], b["custom_id"]) for b in row["components"]] == [
        (2, 3, "Approve", f"{APPROVE}:{ID}"),
        (2, 4, "Deny\u2026", f"{DENY}:{ID}"),
    ]
    assert body["allowed_mentions"] == {"parse": []}


def test_buttons_are_gone_once_the_request_is_not_pending() -> None:
    """Approved, denied, expired, cancelled: no components, and how it ended is said."""
    decided = Decision(status="approved", note=None, decided_at=NOW, decided_by="alice")
    denied = Decision(status="denied", note="too much", decided_at=NOW, decided_by="carol")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"status": "approved", "decision": decided}, "Approved:** `issue_refund` by `alice`"),
        ({"status": "denied", "decision": denied}, "Denied:** `issue_refund` by `carol`"),
        ({"status": "expired"}, "Expired"),
        ({"status": "cancelled", "cancelled_at": NOW}, "Cancelled"),
    ]
    for changed, words in cases:
        body = message(request(**changed), now=NOW)
        assert body["components"] == []
        assert words in body["content"]
    body = message(request(status="denied", decision=denied), now=NOW)
    assert "Note: `too much`" in body["content"]


def test_an_approval_counted_is_shown_with_the_buttons_still_there() -> None:
    """One of two approvals: "1 of 2 (alice)", and the request can still be decided."""
    body = message(
        request(approvals_required=2, approvals=(Approval(by="alice", at=NOW),)), now=NOW
    )
    assert "Approved so far: 1 of 2 (`alice`)" in body["content"]
    assert len(body["components"][0]["components"]) == 2


def test_what_a_model_wrote_is_inert_text() -> None:
    """Mentions, markdown and backticks from the agent are in code, cannot close it, ping nobody."""
    hostile = "@everyone <@123> **bold** ```\n[link](https://evil.example) \u202e"
    body = message(
        request(tool="x`y", context=hostile, arguments={"a`b": hostile}, requested_by="@here"),
        now=NOW,
    )
    text = json.dumps(body)
    assert "```\n[link]" not in text and "x`y" not in text and "a`b" not in text
    assert "\u202e" not in body["embeds"][0]["description"]  # escaped, as the page shows it
    assert body["embeds"][0]["description"].count("```") == 2
    for field in body["embeds"][0]["fields"]:
        assert field["value"].startswith("`") and field["value"].count("`") == 2
    assert body["allowed_mentions"] == {"parse": []}


def test_the_agents_reason_keeps_its_lines_in_its_code_block() -> None:
    """A reason of several lines shows as those lines; hidden characters are still escaped."""
    said = "Refund order 1234.\r\nThe customer was charged twice.\n\x1b[31mred"
    description = message(request(context=said), now=NOW)["embeds"][0]["description"]
    block = description.split("```\n", 1)[1]
    assert block.startswith("Refund order 1234.\nThe customer was charged twice.\n")
    assert "\x1b" not in block and "\\u001b[31mred" in block
    assert description.count("```") == 2


def test_long_requests_are_cut_to_discords_limits() -> None:
    """2,000 characters of content, 1,024 a field, 25 fields, 6,000 an embed, at most always."""
    huge = "y" * 10_000
    body = message(
        request(
            tool="t" * 500,
            context=huge,
            requested_by="r" * 500,
            arguments={f"{i}{'n' * 300}": huge for i in range(40)},
        ),
        now=NOW,
        approvers=["a" * 500],
    )
    assert len(body["content"]) <= 2000
    (embed,) = body["embeds"]
    assert len(embed["description"]) <= 4096
    assert len(embed["fields"]) == MAX_ARGUMENTS + 1 <= 25
    assert all(len(one["name"]) <= 256 and len(one["value"]) <= 1024 for one in embed["fields"])
    assert embed_length(embed) <= 6000
    assert "and 30 more arguments" in embed["fields"][-1]["value"]


def test_a_redaction_marker_shows_as_redacted_only_where_the_create_said_so() -> None:
    """The guard's marker at a redacted path reads "redacted"; the same shape elsewhere is JSON."""
    marker = {"$redacted": "1a2b3c4d5e6f"}
    body = message(
        request(arguments={"card": marker, "note": marker}, redacted=("/card",)), now=NOW
    )
    card, note = body["embeds"][0]["fields"]
    assert card["value"] == "`\u2039redacted 1a2b3c4d5e6f\u203a`"
    assert note["value"] == '`{"$redacted":"1a2b3c4d5e6f"}`'


def test_custom_ids_name_this_providers_actions_only() -> None:
    """``ag_approve:ID`` parses; anything else (another app's button, junk) does not."""
    assert parse_custom_id(f"{APPROVE}:{ID}") == (APPROVE, ID)
    assert parse_custom_id(f"{DENY_REASON}:{ID}") == (DENY_REASON, ID)
    for bad in (
        None,
        3,
        "",
        "ag_approve",
        f"other:{ID}",
        "ag_approve:",
        "ag_deny:a b",
        "ag_deny:" + "x" * 200,
    ):
        assert parse_custom_id(bad) is None


def test_the_deny_modal_asks_why_and_its_answer_is_read_in_both_shapes() -> None:
    """Type 9 with one required paragraph input; a submission in rows or in labels is read."""
    modal = deny_modal(request())
    assert modal["type"] == 9 and modal["data"]["custom_id"] == f"{DENY_REASON}:{ID}"
    assert len(modal["data"]["title"]) <= 45
    (row,) = modal["data"]["components"]
    (field,) = row["components"]
    assert field["type"] == 4 and field["required"] is True and len(field["label"]) <= 45
    rows = {
        "components": [
            {"type": 1, "components": [{"type": 4, "custom_id": "reason", "value": "no"}]}
        ]
    }
    labels = {
        "components": [
            {"type": 18, "component": {"type": 4, "custom_id": "reason", "value": "nope"}}
        ]
    }
    assert submitted_text(rows, "reason") == "no"
    assert submitted_text(labels, "reason") == "nope"
    assert submitted_text({"components": "junk"}, "reason") is None
    assert reply("x") == {
        "type": 4,
        "data": {"content": "x", "flags": 64, "allowed_mentions": {"parse": []}},
    }


def test_the_review_page_link_keeps_the_public_urls_path() -> None:
    """``--public-url https://host/approvals``: the message links that path's review page."""
    body = message(request(), now=NOW, public_url="https://host.example/approvals/")
    assert f"<https://host.example/approvals/?request={ID}>" in body["content"]
    assert "https://" not in message(request(), now=NOW)["content"]
