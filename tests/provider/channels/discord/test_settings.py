"""The Discord channel's settings: flags, environment variables, clear errors, a hidden token."""

from __future__ import annotations

import argparse
import re

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from approval_guard.provider.channels.base import ChannelSettingsError
from approval_guard.provider.channels.discord import DiscordKind, DiscordSettings
from approval_guard.provider.channels.discord.channel import DiscordChannel
from approval_guard.provider.channels.discord.settings import (
    DISCORD_API_URL,
    ENV_DISCORD_BOT_TOKEN,
    ENV_DISCORD_PUBLIC_KEY,
)
from tests.support.fake_discord import CHANNEL, TOKEN

KEY = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    DiscordKind.add_arguments(parser, {})
    return parser.parse_args(list(argv))


def made(argv: list[str], env: dict[str, str] | None = None) -> DiscordChannel | None:
    return DiscordKind.from_args(parse(*argv), env or {}, public_url=None)


def test_flags_make_a_channel_with_the_default_api_url() -> None:
    """The three flags turn Discord on, against Discord's v10 API by default."""
    channel = made(
        [
            "--discord-bot-token",
            TOKEN,
            "--discord-public-key",
            KEY,
            "--discord-channel",
            CHANNEL,
        ]
    )
    assert isinstance(channel, DiscordChannel)
    assert channel.settings.api_url == DISCORD_API_URL == "https://discord.com/api/v10"
    assert channel.settings.channel == CHANNEL
    assert [path for path, _ in channel.routes()] == ["/discord/interactions"]
    assert channel.per_target == 1


def test_the_token_and_key_come_from_the_environment() -> None:
    """``APPROVAL_GUARD_DISCORD_BOT_TOKEN`` / ``..._PUBLIC_KEY`` stand in for their flags."""
    env = {ENV_DISCORD_BOT_TOKEN: TOKEN, ENV_DISCORD_PUBLIC_KEY: KEY.upper()}
    channel = made(
        ["--discord-channel", CHANNEL, "--discord-api-url", "http://127.0.0.1:9/api/v10/"], env
    )
    assert channel is not None
    assert channel.settings.bot_token == TOKEN
    assert channel.settings.public_key == KEY
    assert channel.settings.api_url == "http://127.0.0.1:9/api/v10"
    assert set(DiscordKind.env) == {ENV_DISCORD_BOT_TOKEN, ENV_DISCORD_PUBLIC_KEY}


def test_without_a_channel_discord_is_off_even_with_the_environment_set() -> None:
    """The environment alone leaves Discord off: nothing is posted anywhere."""
    env = {ENV_DISCORD_BOT_TOKEN: TOKEN, ENV_DISCORD_PUBLIC_KEY: KEY}
    assert made([], env) is None


BOTH = {ENV_DISCORD_BOT_TOKEN: TOKEN, ENV_DISCORD_PUBLIC_KEY: KEY}


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["--discord-channel", CHANNEL], {ENV_DISCORD_PUBLIC_KEY: KEY}, "--discord-bot-token"),
        (["--discord-channel", CHANNEL, "--discord-bot-token", TOKEN], {}, "--discord-public-key"),
        (["--discord-bot-token", TOKEN], {}, "needs --discord-channel"),
        (["--discord-api-url", "http://127.0.0.1:9"], BOTH, "needs --discord-channel"),
        (["--discord-channel", "#approvals"], BOTH, "channel id"),
        (["--discord-channel", str(2**64)], BOTH, "channel id"),
        (["--discord-channel", CHANNEL, "--discord-bot-token", "short"], BOTH, "bot token"),
        (["--discord-channel", CHANNEL, "--discord-bot-token", TOKEN + " x"], BOTH, "bot token"),
        (["--discord-channel", CHANNEL, "--discord-public-key", "abc"], BOTH, "public key"),
        (
            ["--discord-channel", CHANNEL, "--discord-api-url", "ftp://example.com/api"],
            BOTH,
            "API URL",
        ),
        (
            ["--discord-channel", CHANNEL, "--discord-api-url", "https://u:p@example.com/api"],
            BOTH,
            "API URL",
        ),
    ],
)
def test_incomplete_or_malformed_settings_stop_serve_with_a_clear_error(
    argv: list[str], env: dict[str, str], words: str
) -> None:
    """A missing secret or a malformed value is a ChannelSettingsError naming what is wrong."""
    with pytest.raises(ChannelSettingsError, match=re.escape(words)):
        made(argv, env)


@pytest.mark.parametrize(
    "url", ["http://discord.com/api/v10", "http://10.0.0.5:8080/api", "http://[2001:db8::1]/api"]
)
def test_a_plain_http_api_url_off_this_machine_is_refused(url: str) -> None:
    """The bot token would travel unencrypted: plain http is for a loopback fake only."""
    argv = ["--discord-channel", CHANNEL, "--discord-api-url", url]
    with pytest.raises(ChannelSettingsError, match="https") as caught:
        made(argv, BOTH)
    assert TOKEN not in str(caught.value)
    for local in ("http://127.0.0.1:9/api/v10", "http://localhost:9/api", "http://[::1]:9/api"):
        channel = made(["--discord-channel", CHANNEL, "--discord-api-url", local], BOTH)
        assert channel is not None and channel.settings.api_url == local


def test_the_token_is_never_in_a_repr_or_an_error() -> None:
    """The settings' and the channel's reprs hide the token, and no error quotes it."""
    settings = DiscordSettings(bot_token=TOKEN, public_key=KEY, channel=CHANNEL)
    channel = DiscordChannel(settings)
    assert TOKEN not in repr(settings) and TOKEN not in repr(channel)
    bad = "x" * 600
    with pytest.raises(ChannelSettingsError) as caught:
        made(
            ["--discord-channel", CHANNEL, "--discord-bot-token", bad, "--discord-public-key", KEY]
        )
    assert bad not in str(caught.value) and "x" * 20 not in str(caught.value)


def test_the_identity_is_a_discord_user_id() -> None:
    """``reviewers link NAME --discord-user ID`` takes a snowflake, nothing else."""
    identity = DiscordKind.identity
    assert identity is not None
    assert (identity.kind, identity.flag, identity.unique) == ("discord", "--discord-user", True)
    assert identity.check("80351110224678912") == "80351110224678912"
    for bad in ("", "@alice", "12a", "1" * 21, str(2**64), " 123"):
        with pytest.raises(ValueError, match="Discord user id"):
            identity.check(bad)


def test_a_user_id_is_kept_as_discord_writes_it_and_a_bad_one_is_never_quoted() -> None:
    """Leading zeros go (clicks name ``803...``); a token given to it by mistake is not echoed."""
    identity = DiscordKind.identity
    assert identity is not None
    assert identity.check("0080351110224678912") == "80351110224678912"
    with pytest.raises(ValueError) as refused:
        identity.check(TOKEN)
    assert TOKEN not in str(refused.value)
