"""A mail sent over STARTTLS to a real server checks its certificate against the host's name."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

from approval_guard.provider.channels.email.smtp import ENV_SMTP_PASSWORD, parse_smtp_url, send
from tests.support.smtp import Mailbox


def test_starttls_with_a_checked_certificate_delivers(tmp_path: Path) -> None:
    """STARTTLS and a login on a real server: the mail arrives (the name checked, not refused)."""
    box = Mailbox(tls_dir=tmp_path, login=("bot", "smtp-pass-7")).start()
    try:
        server = parse_smtp_url(box.url, environ={ENV_SMTP_PASSWORD: "smtp-pass-7"})
        message = EmailMessage()
        message["From"], message["To"] = "approvals@example.com", "alice@example.com"
        message["Subject"] = "tls"
        message.set_content("hello")
        assert send(server, message, timeout=5.0, tls_context=box.client_tls, deadline=10.0)
        (got,) = box.wait_for(1)
        assert got.rcpt_tos == ["alice@example.com"]
    finally:
        box.close()
