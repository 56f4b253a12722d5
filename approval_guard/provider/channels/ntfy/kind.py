"""The ntfy kind: ``serve --ntfy-url``, the token's variable, ``reviewers link --ntfy-topic``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from approval_guard.provider.channels.base import ChannelKind, ChannelSettingsError, Identity
from approval_guard.provider.channels.ntfy.settings import (
    NAME,
    TOKEN_ENV,
    check_topic,
    make_settings,
)

if TYPE_CHECKING:
    from approval_guard.provider.channels.ntfy.channel import NtfyChannel


class NtfyKind(ChannelKind):
    """Push to each reviewer's phone through ntfy, with Approve and Deny buttons."""

    name = NAME
    identity = Identity(kind=NAME, flag="--ntfy-topic", metavar="TOPIC", check=check_topic)
    env = (TOKEN_ENV,)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
        """``--ntfy-url URL`` (the token is read from ``env`` by :meth:`from_args` only)."""
        del env
        parser.add_argument(
            "--ntfy-url",
            default=None,
            metavar="URL",
            help="push each new request to the ntfy topic of every linked reviewer who may "
            "decide it, with Approve and Deny buttons (https://ntfy.sh or your own server; "
            f"an access token from {TOKEN_ENV}; see reviewers link --ntfy-topic)",
        )

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, env: Mapping[str, str], *, public_url: str | None
    ) -> NtfyChannel | None:
        """The channel ``--ntfy-url`` asks for, or None; :class:`ChannelSettingsError` if bad.

        The buttons post to ``public_url``; without one, to the address ``serve``
        listens on (``--host``/``--port``), as the email links do.
        """
        url = getattr(args, "ntfy_url", None)
        if url is None:
            return None
        token = env.get(TOKEN_ENV)
        if token is not None and not token:
            raise ChannelSettingsError(f"{TOKEN_ENV} is set but empty: unset it or give the token")
        # Imported here: the kind is read by every command line, the channel only by serve.
        from approval_guard.provider.channels.ntfy.channel import NtfyChannel

        return NtfyChannel(make_settings(url, token, public_url or _own_url(args)))


def _own_url(args: argparse.Namespace) -> str:
    """``http(s)://HOST:PORT`` that ``serve`` listens on; an error when the port is not fixed."""
    host = str(getattr(args, "host", None) or "127.0.0.1")
    port = getattr(args, "port", None)
    if not isinstance(port, int) or port <= 0 or host in ("0.0.0.0", "::", "[::]", ""):
        # A phone cannot post to "every address" or to a port picked at start.
        raise ChannelSettingsError("--ntfy-url needs --public-url (the address phones post to)")
    scheme = "https" if getattr(args, "tls_cert", None) else "http"
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
