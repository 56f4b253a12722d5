"""API 1.3's ``context`` in the mail and on its confirmation page: labelled, above, escaped."""

from __future__ import annotations

from tests.support.api import REFUND
from tests.support.mail_team import MailTeam, confirm_page

HOSTILE = (
    "Refund it.\r\nBcc: victim@example.com\r\nSubject: you are fired\n"
    "<script>alert(1)</script><a href='https://evil.example'>approve</a>\u202eevil"
)


def _new(team: MailTeam, context: str) -> str:
    body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m", "context": context}
    created: str = team.instance.new(body=body)["id"]
    return created


def test_the_mail_shows_the_agents_reason_labelled_above_the_arguments(team: MailTeam) -> None:
    """Plain and HTML parts: "The agent says:" and the quoted reason come before "Arguments:"."""
    request_id = _new(team, "Duplicate charge, ticket 4411.")
    mail = team.mail_for(request_id, "alice@example.com")
    plain = mail.part("plain")
    assert plain.index("The agent says:") < plain.index("> Duplicate charge, ticket 4411.")
    assert plain.index("> Duplicate charge") < plain.index("Arguments:")
    rich = mail.part("html")
    assert rich.index("The agent says:") < rich.index("Duplicate charge") < rich.index("<pre>")


def test_a_hostile_reason_adds_no_header_and_no_markup(team: MailTeam) -> None:
    """CR LF and header lines stay in the body, escaped; markup is text; the bidi mark shows."""
    request_id = _new(team, HOSTILE)
    mail = team.mail_for(request_id, "alice@example.com")
    assert ["alice@example.com"] == mail.rcpt_tos
    assert mail.message["Bcc"] is None
    assert "Approval needed: issue_refund" == mail.message["Subject"]
    plain = mail.part("plain")
    assert "\r" not in plain.replace("\r\n", "\n")
    assert "Refund it.\\u000d" in plain
    assert "\u202e" not in plain and "\\u202e" in plain
    rich = mail.part("html")
    assert "<script>" not in rich and "<a href='https://evil" not in rich
    assert "&lt;script&gt;" in rich


def test_the_confirmation_page_shows_the_reason_escaped_above_the_arguments(
    team: MailTeam,
) -> None:
    """The link's page quotes the agent's words, as text, before the arguments."""
    request_id = _new(team, HOSTILE)
    page = confirm_page(team.mail_for(request_id, "alice@example.com").links()["approve"])
    assert 200 == page.status_code
    text = page.text
    assert text.index("The agent says:") < text.index('data-testid="context"')
    assert text.index('data-testid="context"') < text.index('data-testid="arguments"')
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "\u202e" not in text


def test_a_very_long_reason_is_mailed_whole(team: MailTeam) -> None:
    """1,000 characters reach the mail, folded nowhere into a header."""
    request_id = _new(team, "why " * 250)
    mail = team.mail_for(request_id, "alice@example.com")
    assert ("why " * 250).strip() in mail.part("plain")
