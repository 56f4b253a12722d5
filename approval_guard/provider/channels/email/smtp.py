"""The SMTP server mail goes through: its URL's forms, and sending one message with ``smtplib``.

========================================  ==========================================
``smtp://host[:25]``                       plain SMTP (a relay on this host or network)
``smtp+starttls://user@host[:587]``        SMTP, then STARTTLS before anything is sent
``smtp://host:587?starttls=true``          the same, for tools that cannot spell a scheme
``smtps://user@host[:465]``                TLS from the first byte (implicit TLS)
========================================  ==========================================

``user:password@`` logs in (percent-encode ``@`` or ``:`` in either); a URL
with a user and no password takes it from ``APPROVAL_GUARD_SMTP_PASSWORD``.
A password is refused on plain SMTP to anywhere but this machine (it would
cross the network in the clear). Certificates are checked against the
system's trust store (``SSL_CERT_FILE`` names another). The password never
appears in a repr, a log line or an error message.
"""

from __future__ import annotations

import contextlib
import smtplib
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from email.message import EmailMessage
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

from approval_guard._codec.hosts import is_loopback

#: The environment variable a URL without a password takes it from.
ENV_SMTP_PASSWORD = "APPROVAL_GUARD_SMTP_PASSWORD"
PLAIN = "plain"
STARTTLS = "starttls"
TLS = "tls"
_DEFAULT_PORTS = {PLAIN: 25, STARTTLS: 587, TLS: 465}
_SCHEMES = {"smtp": PLAIN, "smtp+starttls": STARTTLS, "smtps": TLS}


@attrs.frozen(repr=False)
class SmtpServer:
    """Where and how to send: host, port, ``plain``/``starttls``/``tls``, and the login."""

    host: str
    port: int
    security: str = PLAIN
    username: str | None = None
    password: str | None = attrs.field(default=None, repr=False)

    @property
    def display(self) -> str:
        """The URL fit to show: no password, ever."""
        scheme = {PLAIN: "smtp", STARTTLS: "smtp+starttls", TLS: "smtps"}[self.security]
        user = f"{self.username}@" if self.username else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}"

    def __repr__(self) -> str:
        return f"SmtpServer({self.display!r})"


def parse_smtp_url(url: str, *, environ: Mapping[str, str] | None = None) -> SmtpServer:
    """The server a URL names; ``ValueError`` (never quoting the URL) for a bad one.

    ``environ`` is where ``APPROVAL_GUARD_SMTP_PASSWORD`` is read (at this call).
    """
    bad = "--smtp-url must be smtp://, smtp+starttls:// or smtps://[user[:password]@]host[:port]"
    if not isinstance(url, str) or any(ch.isspace() for ch in url):
        raise ValueError(bad)
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError:
        raise ValueError(bad) from None
    security = _SCHEMES.get(parts.scheme.lower())
    if security is None or not host or parts.path not in ("", "/") or parts.fragment:
        raise ValueError(bad)
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key != "starttls" or value.lower() not in ("true", "false"):
            raise ValueError("--smtp-url takes one query option: ?starttls=true")
        if value.lower() == "true":
            if security == TLS:
                raise ValueError("smtps:// is TLS already; ?starttls=true is for smtp://")
            security = STARTTLS
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    if username and password is None:
        password = (environ or {}).get(ENV_SMTP_PASSWORD) or None
    if password is not None and not username:
        raise ValueError("--smtp-url has a password but no user name")
    if password is not None and security == PLAIN and not is_loopback(host):
        raise ValueError(
            "--smtp-url would send the password in the clear: use smtp+starttls:// or smtps://"
        )
    return SmtpServer(
        host=host,
        port=port or _DEFAULT_PORTS[security],
        security=security,
        username=username,
        password=password,
    )


def send(
    server: SmtpServer,
    message: EmailMessage,
    *,
    timeout: float,
    tls_context: ssl.SSLContext | None = None,
    still_wanted: Callable[[], bool] | None = None,
    deadline: float | None = None,
) -> bool:
    """Send one message (blocking: run it in a thread); ``smtplib``'s or ``OSError`` on failure.

    ``still_wanted`` is asked once connected, right before the message goes: False
    (the request was decided meanwhile) sends nothing and returns False.
    ``timeout`` bounds each read; ``deadline`` (seconds) the whole session: a
    server that answers a byte at a time has its connection shut then, so the
    thread never outlives the outbox's lease.
    """
    context = tls_context or ssl.create_default_context()
    client: smtplib.SMTP
    if server.security == TLS:
        client = smtplib.SMTP_SSL(timeout=timeout, context=context)
    else:
        client = smtplib.SMTP(timeout=timeout)
    # ``SMTP(host, port)`` would connect at once, before the deadline's timer runs; made
    # without them, it must still know the host: TLS checks the certificate against it.
    client._host = server.host  # type: ignore[attr-defined]  # smtplib keeps it untyped
    cut = None if deadline is None else threading.Timer(deadline, _shut, (client,))
    if cut is not None:
        cut.daemon = True
        cut.start()
    try:
        client.connect(server.host, server.port)
        return _session(client, server, message, context, still_wanted)
    finally:
        if cut is not None:
            cut.cancel()


def _shut(client: smtplib.SMTP) -> None:
    """The session's deadline: shut its socket, so the read it waits in fails at once."""
    sock = getattr(client, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _session(
    client: smtplib.SMTP,
    server: SmtpServer,
    message: EmailMessage,
    context: ssl.SSLContext,
    still_wanted: Callable[[], bool] | None,
) -> bool:
    with client:
        if server.security == STARTTLS:
            client.starttls(context=context)
        if server.username:
            client.login(server.username, server.password or "")
        if still_wanted is not None and not still_wanted():
            return False
        client.send_message(message)
    return True


def error_text(exc: BaseException, server: SmtpServer) -> str:
    """One attempt's failure as the outbox keeps it, without the password."""
    text = str(exc).strip()
    if server.password:
        text = text.replace(server.password, "***")
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]
