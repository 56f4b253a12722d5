"""What a server talks to Discord with: the bot's token, the app's public key, the channel, the API.

One Discord application per provider: its bot token (sent as
``Authorization: Bot TOKEN`` when posting and editing messages), its public
key (64 hex characters: the Ed25519 key Discord signs interactions with), the
channel every request is posted to, and the REST API's base URL (Discord's v10
API; a local fake in tests). The token and the key come from the command line
or, better, from ``APPROVAL_GUARD_DISCORD_BOT_TOKEN`` /
``APPROVAL_GUARD_DISCORD_PUBLIC_KEY``; the token is never shown in a repr, a
log line or an error.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

import attrs

from approval_guard._codec.hosts import is_loopback
from approval_guard.provider.channels.base import ChannelSettingsError

#: The channel's name.
NAME = "discord"
ENV_DISCORD_BOT_TOKEN = "APPROVAL_GUARD_DISCORD_BOT_TOKEN"
ENV_DISCORD_PUBLIC_KEY = "APPROVAL_GUARD_DISCORD_PUBLIC_KEY"
#: Discord's REST API, version 10.
DISCORD_API_URL = "https://discord.com/api/v10"

_TOKEN = re.compile(r"[\x21-\x7e]{8,512}")
_PUBLIC_KEY = re.compile(r"[0-9a-fA-F]{64}")
_SNOWFLAKE = re.compile(r"[0-9]{1,20}")


def _hidden(_: object) -> str:
    return "'***'"


def check_token(value: object) -> str:
    """A bot token: 8 to 512 printable ASCII characters, no spaces (never quoted back)."""
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise ValueError(
            "the Discord bot token must be 8 to 512 printable ASCII characters without spaces, "
            "as the Developer Portal's Bot page shows it, without 'Bot ' (the value is not shown)"
        )
    return value


def check_public_key(value: object) -> str:
    """The application's public key: 64 hex characters (an Ed25519 key), lower-cased."""
    if not isinstance(value, str) or not _PUBLIC_KEY.fullmatch(value):
        raise ValueError(
            "the Discord public key must be the 64 hex characters the Developer Portal's "
            "General Information page shows"
        )
    return value.lower()


def check_snowflake(value: object, what: str = "a Discord id") -> str:
    """A Discord id (a snowflake): 1 to 20 digits below 2**64; ``ValueError`` otherwise."""
    if not isinstance(value, str) or not _SNOWFLAKE.fullmatch(value) or int(value) >= 2**64:
        # The value is not quoted: a token given to the wrong flag must not be printed.
        raise ValueError(f"{what} is a number such as 123456789012345678")
    # As Discord writes it (no leading zeros), or a click would never match the link.
    return str(int(value))


def check_user(value: str) -> str:
    """A reviewer's Discord user id (``reviewers link NAME --discord-user ID``)."""
    return check_snowflake(value, "a Discord user id")


def check_api_url(value: object) -> str:
    """The REST API's base URL (``https://HOST/...``, ``http`` on loopback), no trailing ``/``."""
    try:
        if not isinstance(value, str) or any(ch.isspace() for ch in value):
            raise ValueError
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a malformed port
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError
        if parts.username is not None or parts.password is not None:
            raise ValueError
        if parts.query or parts.fragment:
            raise ValueError
    except ValueError:
        raise ValueError(
            "the Discord API URL must be an http(s)://HOST/... URL "
            "without credentials, query or fragment"
        ) from None
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        # The bot token goes in every call's Authorization header.
        raise ValueError(
            "the Discord API URL is plain http, so the bot token would travel unencrypted: "
            "use https (plain http only for a fake on this machine)"
        )
    return value.rstrip("/")


@attrs.frozen
class DiscordSettings:
    """A server's Discord application (``DiscordSettings(bot_token=..., public_key=..., ...)``).

    :param bot_token: the bot's token (Bot page of the Developer Portal).
    :param public_key: the application's public key, 64 hex characters.
    :param channel: the id of the channel every request is posted to.
    :param api_url: the REST API's base URL (a local fake Discord in tests).
    """

    bot_token: str = attrs.field(repr=_hidden)
    public_key: str
    channel: str
    api_url: str = DISCORD_API_URL

    def __attrs_post_init__(self) -> None:
        check_token(self.bot_token)
        object.__setattr__(self, "public_key", check_public_key(self.public_key))
        check_snowflake(self.channel, "a Discord channel id")
        object.__setattr__(self, "api_url", check_api_url(self.api_url))


# ---------------------------------------------------------------------- command lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--discord-bot-token``, ``--discord-public-key``, ``--discord-channel``, the API URL."""
    parser.add_argument(
        "--discord-bot-token",
        metavar="TOKEN",
        default=None,
        help=f"the Discord bot's token (better: ${ENV_DISCORD_BOT_TOKEN})",
    )
    parser.add_argument(
        "--discord-public-key",
        metavar="HEX",
        default=None,
        help=f"the Discord application's public key (or ${ENV_DISCORD_PUBLIC_KEY})",
    )
    parser.add_argument(
        "--discord-channel",
        metavar="CHANNEL_ID",
        default=None,
        help="post every request to this Discord channel (its id) with Approve / Deny buttons",
    )
    parser.add_argument(
        "--discord-api-url",
        metavar="URL",
        default=None,
        help=f"Discord's REST API base URL (default {DISCORD_API_URL}; a fake in tests)",
    )


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> DiscordSettings | None:
    """The application :func:`add_arguments` read, or None; :class:`ChannelSettingsError` if bad.

    Discord is on when ``--discord-channel`` is given; the token and the public
    key are then required (flags or environment). The environment variables
    alone leave Discord off; the other flags without a channel are an error.
    """
    token = getattr(args, "discord_bot_token", None)
    key = getattr(args, "discord_public_key", None)
    channel = getattr(args, "discord_channel", None)
    api_url = getattr(args, "discord_api_url", None)
    if channel is None:
        given = [
            flag
            for flag, value in (
                ("--discord-bot-token", token),
                ("--discord-public-key", key),
                ("--discord-api-url", api_url),
            )
            if value is not None
        ]
        if given:
            raise ChannelSettingsError(f"{' and '.join(given)} needs --discord-channel")
        return None
    token = token or env.get(ENV_DISCORD_BOT_TOKEN) or None
    key = key or env.get(ENV_DISCORD_PUBLIC_KEY) or None
    missing = [
        f"{flag} (or ${name})"
        for flag, name, value in (
            ("--discord-bot-token", ENV_DISCORD_BOT_TOKEN, token),
            ("--discord-public-key", ENV_DISCORD_PUBLIC_KEY, key),
        )
        if not value
    ]
    if missing:
        raise ChannelSettingsError(f"Discord needs {' and '.join(missing)}")
    try:
        return DiscordSettings(
            bot_token=str(token),
            public_key=str(key),
            channel=str(channel),
            api_url=DISCORD_API_URL if api_url is None else api_url,
        )
    except ValueError as exc:
        raise ChannelSettingsError(str(exc)) from None
