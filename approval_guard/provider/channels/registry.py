"""The channels this provider knows: one registration line each, imported when asked for.

Each line names a :class:`~approval_guard.provider.channels.base.ChannelKind`
as ``"module:Class"``. ``serve`` adds each kind's flags, ``reviewers link``
each kind's identity flag, and :class:`ProviderServer` runs each configured
one's routes and queues through the one outbox. Adding a channel is a folder
under ``provider/channels/`` and one line here.
"""

from __future__ import annotations

import functools
import importlib

from approval_guard.provider.channels.base import ChannelKind, Identity

KINDS: tuple[str, ...] = (
    "approval_guard.provider.channels.webhooks.settings:WebhooksKind",
    "approval_guard.provider.channels.slack.settings:SlackKind",
    "approval_guard.provider.channels.email.settings:EmailKind",
)


@functools.cache
def kinds() -> tuple[type[ChannelKind], ...]:
    """Every registered kind, imported (once)."""
    found = []
    for entry in KINDS:
        module, _, name = entry.partition(":")
        kind = getattr(importlib.import_module(module), name)
        if not (isinstance(kind, type) and issubclass(kind, ChannelKind)):
            raise TypeError(f"{entry} is not a ChannelKind")
        found.append(kind)
    return tuple(found)


def identities() -> dict[str, Identity]:
    """Each kind's identity by its ``KIND`` (for ``reviewers link --channel KIND:ID``)."""
    return {kind.identity.kind: kind.identity for kind in kinds() if kind.identity is not None}
