"""ntfy's settings: ``--ntfy-url`` alone turns it on, bad settings stop ``serve`` clearly."""

from __future__ import annotations

import argparse

import pytest

from approval_guard.provider.channels.base import ChannelSettingsError
from approval_guard.provider.channels.ntfy import NtfyKind
from approval_guard.provider.channels.ntfy.channel import NtfyChannel
from approval_guard.provider.channels.ntfy.settings import TOKEN_ENV, check_topic

TOKEN = "tk_secretsecretsecretsecret0001"


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    NtfyKind.add_arguments(parser, {})
    parser.add_argument("--host", default="127.0.0.1")  # serve's own, read for the buttons
    parser.add_argument("--port", type=int, default=0)
    return parser.parse_args(list(argv))


def _channel(
    *argv: str, env: dict[str, str] | None = None, public_url: str | None = "https://a.example"
) -> NtfyChannel | None:
    return NtfyKind.from_args(_parse(*argv), env or {}, public_url=public_url)


def test_without_ntfy_url_there_is_no_channel() -> None:
    """No ``--ntfy-url``: no ntfy channel, even with a token in the environment."""
    assert _channel(env={TOKEN_ENV: TOKEN}) is None


def test_ntfy_url_alone_turns_it_on() -> None:
    """``--ntfy-url`` alone makes a channel publishing JSON to the server's root."""
    channel = _channel("--ntfy-url", "https://ntfy.sh/", public_url="https://approvals.example")
    assert channel is not None and channel.name == "ntfy"
    assert channel.settings.publish_url == "https://ntfy.sh/"
    assert channel.settings.token is None


def test_a_self_hosted_server_keeps_its_path_prefix() -> None:
    """A server behind a path (``https://host/ntfy``) is published to at that path's root."""
    channel = _channel("--ntfy-url", "https://push.example/ntfy")
    assert channel is not None and channel.settings.publish_url == "https://push.example/ntfy/"


def test_the_token_comes_from_the_environment_and_is_never_shown() -> None:
    """The token is read from APPROVAL_GUARD_NTFY_TOKEN and never appears in a repr."""
    channel = _channel("--ntfy-url", "https://ntfy.sh", env={TOKEN_ENV: TOKEN})
    assert channel is not None and channel.settings.token == TOKEN
    assert TOKEN not in repr(channel) and TOKEN not in repr(channel.settings)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ntfy.sh", "http(s)://HOST"),
        ("ftp://ntfy.sh", "http(s)://HOST"),
        ("https://", "http(s)://HOST"),
        ("https://ntfy.sh/ x", "http(s)://HOST"),
        ("https://ntfy.sh:99999", "http(s)://HOST"),
        ("https://user:pw@ntfy.sh", "must not carry a user or password"),
        ("https://ntfy.sh/?topic=x", "without a query"),
    ],
)
def test_a_bad_url_stops_serve_with_a_clear_error(url: str, said: str) -> None:
    """A URL that cannot be an ntfy server's root is refused at start, saying why."""
    with pytest.raises(ChannelSettingsError, match="--ntfy-url") as info:
        _channel("--ntfy-url", url)
    assert said in str(info.value)


@pytest.mark.parametrize("token", ["", "tk_with space", "tk_\u00e9", "tk_line\nbreak", "x" * 600])
def test_a_bad_token_is_refused_without_quoting_it(token: str) -> None:
    """An empty or unsendable token stops ``serve``; the message never quotes it."""
    with pytest.raises(ChannelSettingsError, match=TOKEN_ENV) as info:
        _channel("--ntfy-url", "https://ntfy.sh", env={TOKEN_ENV: token})
    assert not token or token not in str(info.value)


def test_nothing_is_pushed_over_plain_http_to_another_host() -> None:
    """``http://`` is refused unless the server is on this machine: a push carries button tokens."""
    for env in ({TOKEN_ENV: TOKEN}, {}):
        with pytest.raises(ChannelSettingsError, match="unencrypted"):
            _channel("--ntfy-url", "http://push.example", env=env)
    for local in ("http://127.0.0.1:8080", "http://localhost", "http://[::1]:80"):
        assert _channel("--ntfy-url", local, env={TOKEN_ENV: TOKEN}) is not None


def test_a_public_url_with_a_path_is_kept() -> None:
    """``--public-url https://host/approvals`` is the buttons' base, its path kept."""
    channel = _channel("--ntfy-url", "https://ntfy.sh", public_url="https://host/approvals/")
    assert channel is not None and channel.settings.public_url == "https://host/approvals"


@pytest.mark.parametrize("topic", ["", "a/b", "a b", "t" * 65, "caf\u00e9", "a,b"])
def test_a_topic_ntfy_would_refuse_cannot_be_linked(topic: str) -> None:
    """A reviewer's topic must be one ntfy accepts: 1-64 of letters, digits, - and _."""
    with pytest.raises(ValueError, match="ntfy topic"):
        check_topic(topic)
    assert check_topic("alice-Phone_7f3k9q2w8e") == "alice-Phone_7f3k9q2w8e"


def test_the_identity_is_linked_with_ntfy_topic() -> None:
    """``reviewers link NAME --ntfy-topic TOPIC`` / ``--channel ntfy:TOPIC``, one reviewer each."""
    identity = NtfyKind.identity
    assert identity is not None
    assert (identity.kind, identity.flag, identity.metavar) == ("ntfy", "--ntfy-topic", "TOPIC")
    assert identity.unique and NtfyKind.env == (TOKEN_ENV,)


def test_without_a_public_url_the_buttons_post_to_the_served_address() -> None:
    """No ``--public-url``: the buttons post to ``serve``'s own host and port, as email links do."""
    args = _parse("--ntfy-url", "https://ntfy.sh")
    args.host, args.port, args.tls_cert = "::1", 9123, None
    channel = NtfyKind.from_args(args, {}, public_url=None)
    assert channel is not None and channel.settings.public_url == "http://[::1]:9123"
    args.port = 0  # a port picked at start is unknown here: the phone could not be told
    with pytest.raises(ChannelSettingsError, match="--public-url"):
        NtfyKind.from_args(args, {}, public_url=None)


def test_buttons_need_a_public_url_when_serve_listens_on_every_address() -> None:
    """``--host 0.0.0.0`` without ``--public-url``: a phone cannot post there, so serve stops."""
    with pytest.raises(ChannelSettingsError, match="--public-url"):
        _channel(
            "--ntfy-url", "https://ntfy.sh", "--host", "0.0.0.0", "--port", "8765", public_url=None
        )
