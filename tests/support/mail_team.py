"""A provider that mails its reviewers: a store (SQLite or PostgreSQL), reviewers, SMTP."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import requests

from approval_guard.provider import ProviderServer, StoreProtocol
from approval_guard.provider.channels.email.settings import email_settings
from approval_guard.provider.rules.config import parse_rules
from tests.support.api import Api
from tests.support.smtp import Mailbox, Received

SENDER = "approvals@example.com"

#: issue_refund: payments, not by who asked; big_refund: two of payments; wire_money: 1m valid.
RULES = """\
[tools.issue_refund]
approvers = ["payments"]
self_approval = false

[tools.big_refund]
approvers = ["payments"]
approvals_required = 2

[tools.wire_money]
max_valid_for = "1m"
"""

#: name -> (roles, address)
PEOPLE = {
    "alice": (["payments"], "alice@example.com"),
    "bob": (["payments"], "bob@example.com"),
    "carol": (["ops"], "carol@example.com"),
}


#: Every payments reviewer, carol by her address, and an address no reviewer has.
TO = ("role:payments", "carol@example.com", "nobody@example.com")


class Clock:
    """The provider's clock: the system's, moved on by ``offset`` (so expiry needs no sleep)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(timezone.utc) + self.offset


@attrs.define
class MailTeam:
    """A running provider that mails ``role:payments``, its store, tokens, and the mailbox."""

    server: ProviderServer
    store: StoreProtocol
    mailbox: Mailbox
    clock: Clock
    tokens: dict[str, str]

    @property
    def instance(self) -> Api:
        return Api(self.server.url, self.tokens["instance"])

    def reviewer(self, name: str) -> Api:
        return Api(self.server.url, self.tokens[name])

    def mail_for(self, request_id: str, address: str) -> Received:
        """The mail about ``request_id`` to ``address``, once it has arrived."""
        return self.mailbox.wait_until(
            lambda mail: (
                mail.message["X-Approval-Guard-Request"] == request_id and address in mail.rcpt_tos
            )
        )


def mailing_server(
    store: StoreProtocol, mailbox: Mailbox, to: tuple[str, ...] = TO, *, backoff: float = 0.05
) -> ProviderServer:
    """A provider on ``store`` that mails ``to`` through ``mailbox``, retrying after ``backoff``."""
    return ProviderServer(
        store,
        rules=parse_rules(RULES),
        email=email_settings(mailbox.url, SENDER, to, backoff=backoff, environ={}),
    )


def start_mail_team(
    store: StoreProtocol, mailbox: Mailbox, clock: Clock, *, to: tuple[str, ...] = TO
) -> MailTeam:
    tokens: dict[str, str] = {}
    for name, (roles, address) in PEOPLE.items():
        tokens[name] = store.add_reviewer(name, roles=roles)
        store.link_identity(name, "email", address)
    server = mailing_server(store, mailbox, to)
    first = server.first_start_tokens
    assert first is not None
    tokens["instance"] = first.instance
    server.start()
    return MailTeam(server=server, store=store, mailbox=mailbox, clock=clock, tokens=tokens)


def confirm_page(url: str) -> requests.Response:
    """Follow a mail's link as a mail client would: a plain GET."""
    return requests.get(url, timeout=10, allow_redirects=False)


def token_of(url: str) -> str:
    found = re.search(r"[?&]token=([^&]+)", url)
    assert found is not None, "a link without a token"
    return found.group(1)


def post_decision(base: str, request_id: str, token: str, **fields: Any) -> requests.Response:
    """What the confirmation page's button sends."""
    return requests.post(
        f"{base}/email/requests/{request_id}/decision",
        data={"token": token, **fields},
        timeout=10,
        allow_redirects=False,
    )


def page_text(response: requests.Response) -> str:
    """A page's words, tags removed."""
    return " ".join(re.sub(r"<[^>]+>", " ", response.text).split())
