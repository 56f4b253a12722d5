"""One-click email approvals for the local provider (docs/email.md).

::

    from approval_guard.provider import ProviderServer
    from approval_guard.provider.channels.email import email_settings

    email = email_settings(
        "smtp+starttls://bot@smtp.example.com:587",  # password: $APPROVAL_GUARD_SMTP_PASSWORD
        "approvals@example.com",
        ["role:payments"],
    )
    ProviderServer("approvals.sqlite3", email=email, public_url="https://approvals.example.com")
"""

from __future__ import annotations

from approval_guard.provider.channels.email.settings import EmailSettings, email_settings
from approval_guard.provider.channels.email.smtp import SmtpServer, parse_smtp_url

__all__ = ["EmailSettings", "SmtpServer", "email_settings", "parse_smtp_url"]
