"""The channels one server sends through: its webhooks, Slack and email, and those it was given."""

from __future__ import annotations

from collections.abc import Sequence

from approval_guard.provider.channels.base import Channel
from approval_guard.provider.channels.email.recipients import EmailRoutes
from approval_guard.provider.channels.email.settings import EmailSettings
from approval_guard.provider.channels.slack.settings import SlackSettings
from approval_guard.provider.channels.webhooks.settings import WebhookSettings
from approval_guard.provider.rules.config import Rules


def configured_channels(
    webhooks: WebhookSettings,
    slack: SlackSettings | None,
    email: EmailSettings | None,
    email_routes: EmailRoutes,
    rules: Rules,
    *,
    base_url: str,
    given: Sequence[Channel] = (),
) -> tuple[Channel, ...]:
    """Every channel a server sends through; ``TypeError``/``ValueError`` for a bad one.

    ``ProviderServer``'s ``webhooks=``, ``slack=`` and ``email=`` (older than
    this interface) become channels here; ``given`` are added as they are. Two
    channels of one name are refused.
    """
    for one in given:
        if not isinstance(one, Channel):
            raise TypeError(f"channels must be Channel objects, not {type(one).__name__}")
    found: list[Channel] = []
    if webhooks.targets:
        from approval_guard.provider.channels.webhooks.channel import WebhooksChannel

        found.append(WebhooksChannel(webhooks))
    if slack is not None:
        from approval_guard.provider.channels.slack.channel import SlackChannel

        horizon = webhooks.backoff.give_up_after
        found.append(SlackChannel(slack, public_url=webhooks.public_url, horizon=horizon))
    if email is not None:
        from approval_guard.provider.channels.email.channel import EmailChannel

        base = email.public_url or webhooks.public_url or base_url
        found.append(EmailChannel(email, email_routes, rules, base))
    found.extend(given)
    names = [one.name for one in found]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"the channel {name!r} is configured twice")
    return tuple(found)
