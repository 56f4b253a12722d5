"""The Discord kind: its serve flags, the secrets' variables, ``reviewers link --discord-user``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from approval_guard.provider.channels.base import ChannelKind, Identity
from approval_guard.provider.channels.discord import settings as discord_settings
from approval_guard.provider.channels.discord.settings import (
    ENV_DISCORD_BOT_TOKEN,
    ENV_DISCORD_PUBLIC_KEY,
    NAME,
    check_user,
)

if TYPE_CHECKING:
    from approval_guard.provider.channels.discord.channel import DiscordChannel


class DiscordKind(ChannelKind):
    """Discord: ``serve --discord-bot-token --discord-public-key --discord-channel``."""

    name: ClassVar[str] = NAME
    identity: ClassVar[Identity | None] = Identity(
        kind=NAME, flag="--discord-user", metavar="ID", check=check_user
    )
    env: ClassVar[tuple[str, ...]] = (ENV_DISCORD_BOT_TOKEN, ENV_DISCORD_PUBLIC_KEY)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
        """``--discord-bot-token``, ``--discord-public-key``, ``--discord-channel``, the API URL.

        ``env`` is not read here: the secrets' variables are read when the
        channel is made, so they alone never look like flags given.
        """
        del env
        discord_settings.add_arguments(parser)

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, env: Mapping[str, str], *, public_url: str | None
    ) -> DiscordChannel | None:
        """The channel the flags and environment ask for; None without ``--discord-channel``."""
        found = discord_settings.settings_from_args(args, env)
        if found is None:
            return None
        # Imported here: the kind is read by every command line, the channel only by serve.
        from approval_guard.provider.channels.discord.channel import DiscordChannel

        return DiscordChannel(found, public_url=public_url)
