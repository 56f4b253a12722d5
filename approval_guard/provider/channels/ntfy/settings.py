"""ntfy's settings: ``serve --ntfy-url``, the access token's variable, a reviewer's topic.

``--ntfy-url URL`` alone turns the channel on: every linked reviewer the
tool's rule lets decide gets a push on their own topic. ``URL`` is the ntfy
server's root (``https://ntfy.sh`` or a self-hosted one, a path prefix kept);
the access token, when the topics need one, comes only from
``APPROVAL_GUARD_NTFY_TOKEN`` (never a flag: a flag shows in ``ps``). Every
check runs at start and raises :class:`ChannelSettingsError` with a message
that never quotes the token.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import attrs

from approval_guard._codec.hosts import is_loopback
from approval_guard.provider.channels.base import ChannelSettingsError
from approval_guard.provider.channels.public_url import check_public_url

#: The environment variable the access token comes from.
#: The channel's name.
NAME = "ntfy"
TOKEN_ENV = "APPROVAL_GUARD_NTFY_TOKEN"
#: A topic as ntfy's server accepts one (its ``topicRegex``).
_TOPIC = re.compile(r"[-_A-Za-z0-9]{1,64}")
#: An access token as it may go in a header: printable ASCII, no space (ntfy's are ``tk_...``).
_TOKEN = re.compile(r"[\x21-\x7e]{1,512}")


def check_topic(value: str) -> str:
    """A reviewer's ntfy topic as stored; ``ValueError`` with a clear message otherwise."""
    if not isinstance(value, str) or _TOPIC.fullmatch(value) is None:
        raise ValueError(
            "an ntfy topic is 1 to 64 letters, digits, '-' or '_' (make it long and "
            "unguessable: anyone who knows it can read its notifications)"
        )
    return value


def check_server_url(value: str) -> str:
    """The ntfy server's root URL, no trailing ``/``; :class:`ChannelSettingsError` if bad."""
    what = "--ntfy-url must be the ntfy server's http(s)://HOST[/PREFIX] (e.g. https://ntfy.sh)"
    if not isinstance(value, str) or any(ch.isspace() for ch in value) or not value.isascii():
        raise ChannelSettingsError(what)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ChannelSettingsError(what) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ChannelSettingsError(what)
    if parts.username is not None or parts.password is not None:
        raise ChannelSettingsError(
            f"--ntfy-url must not carry a user or password: put an access token in {TOKEN_ENV}"
        )
    if parts.query or parts.fragment:
        raise ChannelSettingsError(f"{what}, without a query or fragment")
    return value.rstrip("/")


def check_token(value: str) -> str:
    """The access token as it is sent; :class:`ChannelSettingsError` (never quoting it) if bad."""
    if _TOKEN.fullmatch(value) is None:
        raise ChannelSettingsError(
            f"{TOKEN_ENV} must be an ntfy access token (tk_..., printable ASCII, no spaces)"
        )
    return value


@attrs.frozen
class NtfySettings:
    """Where to publish and how: the server's root, the token (never shown), the links' base."""

    #: The ntfy server's root, no trailing ``/`` (JSON is published to ``url + "/"``).
    url: str
    #: The access token (``Authorization: Bearer``), or None for open topics. Never shown.
    token: str | None = attrs.field(repr=False)
    #: The provider's address as phones reach it (its path kept); the actions' URLs start here.
    public_url: str | None

    @property
    def publish_url(self) -> str:
        """Where a message is published as JSON: the server's root."""
        return self.url + "/"


def make_settings(url: str, token: str | None, public_url: str | None) -> NtfySettings:
    """Checked settings; :class:`ChannelSettingsError` for ones that cannot work."""
    url = check_server_url(url)
    parts = urlsplit(url)
    if parts.scheme == "http" and not is_loopback(parts.hostname or ""):
        # The pushes carry the buttons' single-use tokens (and the access token, if any).
        raise ChannelSettingsError(
            "--ntfy-url is plain http, so each push's Approve and Deny tokens (and "
            f"{TOKEN_ENV}) would travel unencrypted: use https"
        )
    if token is not None:
        token = check_token(token)
    if public_url is not None:
        try:
            public_url = check_public_url(public_url)
        except ValueError as exc:
            raise ChannelSettingsError(f"--public-url: {exc}") from None
    return NtfySettings(url=url, token=token, public_url=public_url)
