"""One slow SMTP server takes only the email channel's share of the outbox's slots."""

from __future__ import annotations

import time
from pathlib import Path

from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.channels.email.settings import email_settings
from approval_guard.provider.channels.webhooks.channel import WebhooksChannel
from approval_guard.provider.channels.webhooks.settings import webhook_settings
from approval_guard.provider.channels.webhooks.signing import WebhookTarget
from tests.support.api import Api
from tests.support.smtp import SlowGreeting
from tests.support.webhook_receiver import Receiver

#: More mails than the outbox has slots (16), each to its own address.
REVIEWERS = 20


def test_a_slow_smtp_server_does_not_hold_every_slot(tmp_path: Path) -> None:
    """20 mails to a server that never greets: a webhook of the same request still goes at once."""
    slow = SlowGreeting()
    store = Store(str(tmp_path / "a.db"))
    addresses = [f"r{n}@example.com" for n in range(REVIEWERS)]
    for n, address in enumerate(addresses):
        store.add_reviewer(f"r{n}")
        store.link_identity(f"r{n}", "email", address)
    email = email_settings(slow.url, "approvals@example.com", addresses, timeout=5.0)
    try:
        with Receiver() as hook:
            settings = webhook_settings([WebhookTarget(hook.url)], None, 0.05, 3600.0, None)
            with ProviderServer(store, email=email, channels=[WebhooksChannel(settings)]) as server:
                tokens = server.first_start_tokens
                assert tokens is not None
                started = time.monotonic()
                Api(server.url, tokens.instance).new()
                assert slow.connected.wait(10)
                hook.wait_count(1, timeout=20)
                took = time.monotonic() - started
                slow.greet()
    finally:
        store.close()
    # Not after a mail's deadline (3 x 5 s): the mails never had every slot.
    assert took < 5.0, took
