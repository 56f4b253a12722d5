"""Following an email link: a GET shows, the button decides once, every rule holds as on the API."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from approval_guard.provider.channels.links import Link, make_token
from tests.support.mail_team import MailTeam, confirm_page, page_text, post_decision, token_of


def _links(team: MailTeam, request_id: str, address: str = "alice@example.com") -> dict[str, str]:
    return team.mail_for(request_id, address).links()


def _decisions(team: MailTeam, request_id: str) -> list[str]:
    rows = team.store.audit(request_id=request_id)
    return [row.action for row in rows if row.action in ("request.approval", "request.denial")]


def test_following_a_link_decides_nothing(team: MailTeam) -> None:
    """GETs of both links (as a mail scanner would) show the confirmation and change nothing."""
    created = team.instance.new(tool="issue_refund")
    links = _links(team, created["id"])
    for url in [*links.values(), *links.values()]:
        shown = confirm_page(url)
        assert 200 == shown.status_code
        assert 'data-testid="confirm"' in shown.text
        assert "payment_123" in shown.text
    assert "pending" == team.instance.poll(created["id"]).json()["status"]
    assert [] == _decisions(team, created["id"])


def test_the_button_approves_and_the_audit_row_names_the_channel(team: MailTeam) -> None:
    """The POST approves as alice; the audit row says channel email, her address, her client."""
    created = team.instance.new(tool="issue_refund")
    token = token_of(_links(team, created["id"])["approve"])
    done = post_decision(team.server.url, created["id"], token, note="duplicate confirmed")
    assert 200 == done.status_code, done.text
    assert "Approved" in page_text(done)
    final = team.instance.poll(created["id"]).json()
    assert ("approved", "alice", "duplicate confirmed") == (
        final["status"],
        final["decision"]["decided_by"],
        final["decision"]["note"],
    )
    (row,) = [
        r for r in team.store.audit(request_id=created["id"]) if r.action.startswith("request.appr")
    ]
    assert ("alice", "127.0.0.1") == (row.actor, row.source)
    assert ("email", "alice@example.com") == (row.detail["channel"], row.detail["channel_user"])


def test_the_deny_link_denies(team: MailTeam) -> None:
    """bob's deny link records a denial by bob."""
    created = team.instance.new(tool="issue_refund")
    token = token_of(_links(team, created["id"], "bob@example.com")["deny"])
    assert 200 == post_decision(team.server.url, created["id"], token).status_code
    final = team.instance.poll(created["id"]).json()
    assert ("denied", "bob") == (final["status"], final["decision"]["decided_by"])


def test_a_link_used_twice_decides_once(team: MailTeam) -> None:
    """On a two-person request the same link, then the mail's other link, are refused: 409."""
    created = team.instance.new(tool="big_refund")
    links = _links(team, created["id"])
    token = token_of(links["approve"])
    assert 200 == post_decision(team.server.url, created["id"], token).status_code
    again = post_decision(team.server.url, created["id"], token)
    assert 409 == again.status_code
    assert "already been used" in page_text(again)
    other = post_decision(team.server.url, created["id"], token_of(links["deny"]))
    assert 409 == other.status_code
    assert 409 == confirm_page(links["approve"]).status_code
    final = team.instance.poll(created["id"]).json()
    assert ("pending", 1) == (final["status"], len(final["approvals"]))
    assert ["request.approval"] == _decisions(team, created["id"])


def test_a_link_for_another_request_decides_nothing(team: MailTeam) -> None:
    """A's token on B's address: 400 on the page and on the button; B stays pending."""
    a = team.instance.new(tool="issue_refund")
    b = team.instance.new(tool="issue_refund")
    token = token_of(_links(team, a["id"])["approve"])
    foreign = f"{team.server.url}/email/requests/{b['id']}?token={token}"
    assert 400 == confirm_page(foreign).status_code
    refused = post_decision(team.server.url, b["id"], token)
    assert 400 == refused.status_code
    assert "another request" in page_text(refused)
    assert "pending" == team.instance.poll(b["id"]).json()["status"]
    assert [] == _decisions(team, b["id"])


def test_a_link_after_the_deadline_decides_nothing(team: MailTeam) -> None:
    """Once the request's deadline passed, its links are 410 Gone and nothing is approved."""
    created = team.instance.new(tool="issue_refund", timeout="10m")
    links = _links(team, created["id"])
    team.clock.offset = timedelta(minutes=11)
    assert 410 == confirm_page(links["approve"]).status_code
    refused = post_decision(team.server.url, created["id"], token_of(links["approve"]))
    assert 410 == refused.status_code
    assert "expired" in page_text(refused)
    assert "expired" == team.instance.poll(created["id"]).json()["status"]
    assert [] == _decisions(team, created["id"])


def _tamper(token: str, where: str) -> str:
    version, payload, mac = token.split(".")
    if where == "payload":
        flipped = "A" if payload[10] != "A" else "B"
        return f"{version}.{payload[:10]}{flipped}{payload[11:]}.{mac}"
    if where == "mac":
        flipped = "A" if mac[5] != "A" else "B"
        return f"{version}.{payload}.{mac[:5]}{flipped}{mac[6:]}"
    if where == "truncated":
        return token[:-3]
    if where == "version":
        return "v2" + token[2:]
    return {"empty": "", "garbage": "%00%ff<script>", "huge": "v1." + "A" * 5000}[where]


@pytest.mark.parametrize(
    "where", ["payload", "mac", "truncated", "version", "empty", "garbage", "huge"]
)
def test_a_tampered_link_is_a_clear_400_and_decides_nothing(team: MailTeam, where: str) -> None:
    """An altered, cut or made-up token: 400 with a page saying so, on GET and POST, never a 500."""
    created = team.instance.new(tool="issue_refund")
    bad = _tamper(token_of(_links(team, created["id"])["approve"]), where)
    shown = confirm_page(f"{team.server.url}/email/requests/{created['id']}?token={bad}")
    assert 400 == shown.status_code
    assert "not valid" in page_text(shown)
    assert 400 == post_decision(team.server.url, created["id"], bad).status_code
    assert [] == _decisions(team, created["id"])


def test_a_removed_reviewers_link_decides_nothing(team: MailTeam) -> None:
    """alice removed after her mail went: her links are 403 and record nothing."""
    created = team.instance.new(tool="issue_refund")
    links = _links(team, created["id"])
    assert team.store.remove_reviewer("alice")
    assert 403 == confirm_page(links["approve"]).status_code
    refused = post_decision(team.server.url, created["id"], token_of(links["approve"]))
    assert 403 == refused.status_code
    assert "no longer a reviewer" in page_text(refused)
    assert [] == _decisions(team, created["id"])


def test_a_link_to_an_address_the_reviewer_no_longer_has_decides_nothing(team: MailTeam) -> None:
    """alice given another address: the mail sent to the old one no longer decides."""
    created = team.instance.new(tool="issue_refund")
    links = _links(team, created["id"])
    team.store.link_identity("alice", "email", "alice@new.example.com")
    assert (
        403 == post_decision(team.server.url, created["id"], token_of(links["approve"])).status_code
    )
    assert [] == _decisions(team, created["id"])


def test_changing_the_address_back_does_not_revive_the_old_mail(team: MailTeam) -> None:
    """A -> B -> A: the mail sent to A before the change stays powerless; new mail to A works."""
    created = team.instance.new(tool="issue_refund")
    links = _links(team, created["id"])
    team.store.link_identity("alice", "email", "alice@new.example.com")
    team.store.link_identity("alice", "email", "alice@example.com")
    refused = post_decision(team.server.url, created["id"], token_of(links["approve"]))
    assert 403 == refused.status_code
    assert "no longer the reviewer" in page_text(refused)
    assert [] == _decisions(team, created["id"])
    mail = team.store.list_outbox(channels=["email"], request_id=created["id"])
    assert ["voided"] == [m.state for m in mail if m.target == "alice@example.com"]
    assert all(m.state != "voided" for m in mail if m.target != "alice@example.com")
    later = team.instance.new(tool="issue_refund")
    fresh = _links(team, later["id"])
    assert (
        200 == post_decision(team.server.url, later["id"], token_of(fresh["approve"])).status_code
    )


def test_approving_your_own_request_by_email_is_refused_as_on_the_api(team: MailTeam) -> None:
    """alice asked: her approve link is 403 with the API's own reason, and nothing is recorded."""
    body = {
        "tool": "issue_refund",
        "arguments": {"x": 1},
        "timeout": "30m",
        "requested_by": "alice",
    }
    created = team.instance.new(body=body)
    links = _links(team, created["id"])
    shown = confirm_page(links["approve"])
    assert 200 == shown.status_code and 'data-testid="confirm"' not in shown.text
    refused = post_decision(team.server.url, created["id"], token_of(links["approve"]))
    assert 403 == refused.status_code
    api = team.reviewer("alice").decide(created["id"], {"status": "approved"})
    assert 403 == api.status_code
    assert api.json()["error"]["message"] in page_text(refused)
    assert [] == _decisions(team, created["id"])
    assert "pending" == team.instance.poll(created["id"]).json()["status"]


def test_a_role_without_permission_is_refused_as_on_the_api(team: MailTeam) -> None:
    """A genuine link for carol (ops) on issue_refund (payments only) is 403, nothing recorded."""
    created = team.instance.new(tool="issue_refund")
    team.mail_for(created["id"], "alice@example.com")
    carol = next(c for c in team.store.list_reviewers() if c.name == "carol")
    link = Link(
        mail_id="mail_for_carol",
        request_id=created["id"],
        reviewer_id=carol.id,
        address="carol@example.com",
        action="approve",
        expires_at=team.store.now() + timedelta(minutes=30),
    )
    token = make_token(team.store.link_secret(), link)
    refused = post_decision(team.server.url, created["id"], token)
    assert 403 == refused.status_code
    api = team.reviewer("carol").decide(created["id"], {"status": "approved"})
    assert api.json()["error"]["message"] in page_text(refused)
    assert [] == _decisions(team, created["id"])
    assert not team.store.link_used("mail_for_carol")


def test_an_email_approval_keeps_the_tools_max_valid_for(team: MailTeam) -> None:
    """wire_money's rule caps validity at 1m: the email approval expires 1m after it was made."""
    created = team.instance.new(tool="wire_money")
    token = token_of(_links(team, created["id"])["approve"])
    assert 200 == post_decision(team.server.url, created["id"], token).status_code
    decision = team.instance.poll(created["id"]).json()["decision"]
    valid = datetime.fromisoformat(decision["expires_at"].replace("Z", "+00:00")) - (
        datetime.fromisoformat(decision["decided_at"].replace("Z", "+00:00"))
    )
    assert timedelta(minutes=1) == valid


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", '{"token": "x"}'),
        ("application/x-www-form-urlencoded", "note=hi"),
        ("application/x-www-form-urlencoded", "token=a&token=b"),
        ("application/x-www-form-urlencoded", "token=a&status=approved"),
        ("application/x-www-form-urlencoded", "%ff%fe=1"),
    ],
)
def test_a_malformed_decision_post_is_a_400(team: MailTeam, content_type: str, body: str) -> None:
    """Not the confirmation's form (JSON, no token, two tokens, other fields): 400, never a 500."""
    import requests

    created = team.instance.new(tool="issue_refund")
    answer = requests.post(
        f"{team.server.url}/email/requests/{created['id']}/decision",
        data=body.encode(),
        headers={"Content-Type": content_type},
        timeout=10,
    )
    assert 400 == answer.status_code
    assert "text/html" in answer.headers["Content-Type"]


def test_the_pages_send_no_referrer_and_cannot_be_framed(team: MailTeam) -> None:
    """Confirmation, result and refusal pages: no-referrer, frame-ancestors 'none', no-store."""
    created = team.instance.new(tool="issue_refund")
    links = _links(team, created["id"])
    answers = [
        confirm_page(links["approve"]),
        post_decision(team.server.url, created["id"], token_of(links["approve"])),
        confirm_page(links["approve"]),
    ]
    assert [200, 200, 409] == [a.status_code for a in answers]
    for answer in answers:
        assert "no-referrer" == answer.headers["Referrer-Policy"]
        assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]
        assert "DENY" == answer.headers["X-Frame-Options"]
        assert "no-store" in answer.headers["Cache-Control"]


def test_a_token_never_reaches_a_log_line_or_the_store(
    team: MailTeam, caplog: pytest.LogCaptureFixture
) -> None:
    """Sending, showing and using links: no token in the provider's logs, audit rows or outbox."""
    caplog.set_level(logging.DEBUG)
    created = team.instance.new(tool="issue_refund")
    links = _links(team, created["id"])
    tokens = [token_of(url) for url in links.values()]
    confirm_page(links["approve"])
    post_decision(team.server.url, created["id"], tokens[0])
    post_decision(team.server.url, created["id"], tokens[0])
    confirm_page(f"{team.server.url}/email/requests/nope?token={tokens[1]}")
    ours = [r for r in caplog.records if not r.name.startswith(("mail.log", "urllib3"))]
    assert ours, "the provider logged nothing at DEBUG"
    for record in ours:
        text = record.getMessage() + str(record.exc_text or "")
        assert not any(token in text or token[3:40] in text for token in tokens)
    stored = repr(team.store.audit()) + repr(team.store.list_outbox())
    assert not any(token[3:40] in stored for token in tokens)
