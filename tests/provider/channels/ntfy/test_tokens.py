"""The buttons' tokens: ntfy's own, bound to one request, expiring with it, joined onto any base."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from approval_guard.provider.channels.links import Link, LinkRefused, make_token
from approval_guard.provider.channels.ntfy.tokens import APPROVE, action_url, read, sign

SECRET = b"s" * 32
NOW = datetime(2026, 9, 16, 12, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(minutes=30)


def _token(request_id: str = "r1") -> str:
    return sign(
        SECRET,
        item_id="item1",
        request_id=request_id,
        reviewer_id="cred1",
        topic="alice-7f3k",
        action=APPROVE,
        expires_at=LATER,
    )


def test_a_token_reads_back_what_it_was_made_for() -> None:
    """Item, request, reviewer, topic, action and deadline come back from a genuine token."""
    link = read(SECRET, _token(), request_id="r1", now=NOW)
    assert (link.mail_id, link.reviewer_id, link.address, link.decision) == (
        "item1",
        "cred1",
        "alice-7f3k",
        "approved",
    )


def test_foreign_tampered_late_and_email_tokens_are_refused() -> None:
    """Another request's, an altered, a late, and an email link's token each decide nothing."""
    with pytest.raises(LinkRefused) as foreign:
        read(SECRET, _token("r2"), request_id="r1", now=NOW)
    token = _token()
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    with pytest.raises(LinkRefused) as tampered:
        read(SECRET, flipped, request_id="r1", now=NOW)
    with pytest.raises(LinkRefused) as late:
        read(SECRET, token, request_id="r1", now=LATER)
    email = make_token(SECRET, Link("item1", "r1", "cred1", "alice-7f3k", APPROVE, LATER))
    with pytest.raises(LinkRefused) as other_channel:
        read(SECRET, email, request_id="r1", now=NOW)
    statuses = [one.value.status for one in (foreign, tampered, late, other_channel)]
    assert statuses == [400, 400, 410, 400]


def test_the_url_is_joined_onto_a_public_url_with_a_path() -> None:
    """``https://host/approvals`` keeps its path; the request id is quoted."""
    url = action_url("https://host/approvals/", "r 1", "TOKEN")
    assert url == "https://host/approvals/ntfy/requests/r%201/decision?token=TOKEN"
