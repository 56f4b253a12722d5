"""The mail about a new request: who gets one, both parts, the call as the page shows it, links."""

from __future__ import annotations

import html
from pathlib import Path

from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.channels.email import email_settings
from tests.support.api import REFUND, Api
from tests.support.mail_team import SENDER, MailTeam, token_of
from tests.support.smtp import Mailbox

#: Shaped like a redaction marker, sent by a client as it is (API 1.3: not listed).
LOOKALIKE = {"$redacted": "0123456789ab"}


def test_a_new_request_mails_each_reviewer_of_the_role_with_both_parts(team: MailTeam) -> None:
    """alice and bob (payments) each get a plain + HTML mail with an approve and a deny link."""
    created = team.instance.new(tool="issue_refund")
    mails = team.mailbox.wait_for(2)
    assert [["alice@example.com"], ["bob@example.com"]] == sorted(m.rcpt_tos for m in mails)
    mail = team.mail_for(created["id"], "alice@example.com")
    assert SENDER == mail.mail_from
    assert "Approval needed: issue_refund" == mail.message["Subject"]
    assert "multipart/alternative" == mail.message.get_content_type()
    plain, rich = mail.part("plain"), mail.part("html")
    assert '"payment_id": "payment_123"' in plain
    assert html.escape('"payment_id": "payment_123"') in rich
    links = mail.links()
    assert {"approve", "deny"} == set(links)
    for url in links.values():
        assert url.startswith(f"{team.server.url}/email/requests/{created['id']}?token=v1.")
        assert html.escape(url) in rich
    assert token_of(links["approve"]) != token_of(links["deny"])


def test_each_reviewer_gets_links_of_their_own(team: MailTeam) -> None:
    """alice's and bob's mails carry different tokens: a mail never holds another's link."""
    created = team.instance.new(tool="issue_refund")
    alice = team.mail_for(created["id"], "alice@example.com").links()
    bob = team.mail_for(created["id"], "bob@example.com").links()
    assert not {token_of(u) for u in alice.values()} & {token_of(u) for u in bob.values()}


def test_only_reviewers_who_may_decide_the_tool_are_mailed(team: MailTeam) -> None:
    """carol (ops), named by address, gets no issue_refund mail; nobody@ (no reviewer) gets none."""
    created = team.instance.new(tool="issue_refund")
    team.mail_for(created["id"], "alice@example.com")
    team.mail_for(created["id"], "bob@example.com")
    rows = team.store.list_outbox(channels=["email"], request_id=created["id"])
    assert ["alice@example.com", "bob@example.com"] == sorted(row.target for row in rows)


def test_an_address_entry_mails_its_reviewer_for_a_tool_anyone_may_decide(team: MailTeam) -> None:
    """A tool without a rule: carol (named by address) is mailed too; nobody@ never is."""
    created = team.instance.new(tool="send_email")
    team.mail_for(created["id"], "carol@example.com")
    rows = team.store.list_outbox(channels=["email"], request_id=created["id"])
    assert ["alice@example.com", "bob@example.com", "carol@example.com"] == sorted(
        row.target for row in rows
    )


def test_the_mail_shows_a_redacted_value_as_the_page_does(team: MailTeam) -> None:
    """A marker the create lists as redacted reads as a redaction; an unlisted one as its JSON."""
    arguments = {**REFUND, "card": {"$redacted": "1a2b3c4d5e6f"}, "memo": LOOKALIKE}
    created = team.instance.new(tool="issue_refund", arguments=arguments, redacted=["/card"])
    plain = team.mail_for(created["id"], "alice@example.com").part("plain").replace("\r\n", "\n")
    assert "\u2039redacted 1a2b3c4d5e6f\u203a" in plain
    assert '"memo": {\n    "$redacted": "0123456789ab"\n  }' in plain
    assert "redacted 0123456789ab" not in plain
    assert "(redacted): card\n" in plain


def test_hidden_characters_and_markup_in_a_call_are_escaped(team: MailTeam) -> None:
    """A bidi override is shown as \\u202e and markup in an argument is escaped in the HTML part."""
    created = team.instance.new(
        tool="issue_refund", arguments={"memo": "<script>x</script>\u202eusd"}
    )
    mail = team.mail_for(created["id"], "alice@example.com")
    assert "\u202e" not in mail.part("plain") and "\\u202e" in mail.part("plain")
    assert "<script>" not in mail.part("html")
    assert "&lt;script&gt;" in mail.part("html")


def test_links_point_at_the_public_url(tmp_path: Path, mailbox: Mailbox) -> None:
    """With ``public_url`` the links use the address people reach, not the bound one."""
    store = Store(str(tmp_path / "a.sqlite3"))
    store.add_reviewer("alice", roles=["payments"])
    store.link_identity("alice", "email", "alice@example.com")
    settings = email_settings(mailbox.url, SENDER, ["alice@example.com"], environ={})
    server = ProviderServer(store, email=settings, public_url="https://approvals.example.com/")
    try:
        server.start()
        tokens = server.first_start_tokens
        assert tokens is not None
        created = Api(server.url, tokens.instance).new(tool="issue_refund")
        mail = mailbox.wait_until(lambda m: m.message["X-Approval-Guard-Request"] == created["id"])
        for url in mail.links().values():
            assert url.startswith(f"https://approvals.example.com/email/requests/{created['id']}?")
    finally:
        server.close()
        store.close()
