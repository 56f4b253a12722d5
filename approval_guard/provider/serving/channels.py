"""The channels one server sends through: its webhook, Slack and email settings, and those given.

:class:`~approval_guard.provider.serving.lifecycle.ProviderServer` takes
webhooks, Slack and email as its own options (a public contract older than
the channel interface) and any other configured
:class:`~approval_guard.provider.channels.base.Channel` as ``channels=``;
here they become the one list its store queues for and its outbox sends through.
"""

from __future__ import annotations

from collections.abc import Sequence

from approval_guard.provider.channels.base import Channel
from approval_guard.provider.channels.email.recipients import EmailRoutes
from approval_guard.provider.channels.email.settings import EmailSettings
from approval_guard.provider.channels.slack.settings import SlackSettings
from approval_guard.provider.channels.webhooks.settings import WebhookSettings
from approval_guard.provider.rules.config import Rules


def given_channels(channels: Sequence[Channel]) -> tuple[Channel, ...]:
    """``channels`` as given to the server, checked: ``TypeError`` for one not a Channel."""
    given = tuple(channels)
    for one in given:
        if not isinstance(one, Channel):
            raise TypeError(f"channels must be Channel objects, not {type(one).__name__}")
    return given


def server_channels(
    *,
    webhooks: WebhookSettings,
    slack: SlackSettings | None,
    email: EmailSettings | None,
    email_routes: EmailRoutes,
    rules: Rules,
    url: str,
    given: Sequence[Channel] = (),
) -> tuple[Channel, ...]:
    """Every channel a server sends through: its webhooks, Slack, email, and those given.

    ``url`` is the server's own address (the email links' base when no public
    URL is set). ``ValueError`` when a channel is configured twice.
    """
    found: list[Channel] = []
    if webhooks.targets:
        from approval_guard.provider.channels.webhooks.channel import WebhooksChannel

        found.append(WebhooksChannel(webhooks))
    if slack is not None:
        from approval_guard.provider.channels.slack.channel import SlackChannel

        found.append(
            SlackChannel(
                slack,
                public_url=webhooks.public_url,
                horizon=webhooks.backoff.give_up_after,
            )
        )
    if email is not None:
        from approval_guard.provider.channels.email.channel import EmailChannel

        base = email.public_url or webhooks.public_url or url
        found.append(EmailChannel(email, email_routes, rules, base))
    found.extend(given)
    names = [one.name for one in found]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"the channel {name!r} is configured twice")
    return tuple(found)
