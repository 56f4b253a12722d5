"""What a server mails with: SMTP server, sender, recipients, retry policy; from a command line."""

from __future__ import annotations

import argparse
import math
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import ClassVar

import attrs

from approval_guard.provider.channels.base import Backoff, ChannelKind, Identity
from approval_guard.provider.channels.email.addresses import (
    AddressError,
    check_address,
    check_recipient,
)
from approval_guard.provider.channels.email.recipients import EmailRoutes, email_routes
from approval_guard.provider.channels.email.smtp import SmtpServer, parse_smtp_url
from approval_guard.provider.channels.public_url import check_public_url
from approval_guard.provider.rules.config import Rules

#: Seconds one SMTP exchange (connect to the end of the message) may take.
SEND_TIMEOUT = 10.0


@attrs.frozen
class EmailSettings:
    """One-click email approvals: where mail goes through, from whom, to whom (docs/email.md).

    ``to`` holds addresses of named reviewers and ``role:NAME`` entries (a
    rules file's ``email_to`` adds more for its tools). ``public_url`` is the
    base of the links (else the server's ``public_url``, else its own URL).
    Make one with :func:`email_settings`, which checks every value.
    """

    smtp: SmtpServer
    sender: str
    to: tuple[str, ...] = ()
    public_url: str | None = None
    backoff: Backoff = attrs.field(factory=Backoff)
    timeout: float = SEND_TIMEOUT
    #: Trust for STARTTLS/TLS (default: the system's); tests give their own CA.
    tls_context: ssl.SSLContext | None = attrs.field(default=None, repr=False)


def email_settings(
    smtp_url: str,
    sender: str,
    to: Sequence[str] = (),
    *,
    public_url: str | None = None,
    backoff: float = 5.0,
    timeout: float = SEND_TIMEOUT,
    tls_context: ssl.SSLContext | None = None,
    environ: Mapping[str, str] | None = None,
) -> EmailSettings:
    """Checked settings; ``ValueError`` for a bad URL, address, recipient or number.

    ``environ`` (default ``os.environ``, read now) may hold the SMTP password
    as ``APPROVAL_GUARD_SMTP_PASSWORD``.
    """
    smtp = parse_smtp_url(smtp_url, environ=os.environ if environ is None else environ)
    try:
        checked_sender = check_address(sender)
    except AddressError as exc:
        raise ValueError(f"--smtp-from: {exc}") from None
    try:
        entries = tuple(dict.fromkeys(check_recipient(one) for one in to))
    except AddressError as exc:
        raise ValueError(f"--email-to: {exc}") from None
    for name, value in (("email backoff", backoff), ("email timeout", timeout)):
        if not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    if public_url is not None:
        public_url = check_public_url(public_url)
    return EmailSettings(
        smtp=smtp,
        sender=checked_sender,
        to=entries,
        public_url=public_url,
        backoff=Backoff(base=float(backoff)),
        timeout=float(timeout),
        tls_context=tls_context,
    )


def routes_for(email: EmailSettings | None, rules: Rules) -> EmailRoutes:
    """Who a server mails; ``ValueError`` when the rules file mails someone and no SMTP is set."""
    routes = email_routes(() if email is None else email.to, rules)
    if email is None and routes.active:
        raise ValueError(
            "the rules file names email_to recipients, but no SMTP server was given (--smtp-url)"
        )
    return routes


# ---------------------------------------------------------------------- command lines


class EmailKind(ChannelKind):
    """Email: its serve flags, and a reviewer's address (``--email``)."""

    name: ClassVar[str] = "email"
    identity: ClassVar[Identity | None] = Identity(
        kind="email", flag="--email", metavar="ADDRESS", check=check_address
    )
    env: ClassVar[tuple[str, ...]] = ("APPROVAL_GUARD_SMTP_PASSWORD",)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
        del env
        add_email_arguments(parser)


def add_email_arguments(parser: argparse.ArgumentParser) -> None:
    """``--smtp-url``, ``--smtp-from``, ``--email-to`` (repeatable)."""
    parser.add_argument(
        "--smtp-url",
        metavar="URL",
        help="mail one-click approval links through this server: smtp://host:port, "
        "smtp+starttls://user@host:587, smtps://user@host:465 "
        "(password: in the URL or $APPROVAL_GUARD_SMTP_PASSWORD)",
    )
    parser.add_argument("--smtp-from", metavar="ADDRESS", help="the mails' From address")
    parser.add_argument(
        "--email-to",
        action="append",
        default=[],
        metavar="RECIPIENT",
        help="mail every new request to this reviewer's address, or role:NAME for every "
        "reviewer with that role and an address (repeatable)",
    )


def email_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> EmailSettings | None:
    """The settings :func:`add_email_arguments` read (None without ``--smtp-url``).

    ``ValueError`` for an incomplete or bad set.
    """
    url = getattr(args, "smtp_url", None)
    to = getattr(args, "email_to", None) or []
    sender = getattr(args, "smtp_from", None)
    if not url:
        if to or sender:
            raise ValueError("--email-to and --smtp-from need --smtp-url")
        return None
    if not sender:
        raise ValueError("--smtp-url needs --smtp-from ADDRESS")
    return email_settings(url, sender, to, environ=environ)
