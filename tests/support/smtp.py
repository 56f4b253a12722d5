"""A real SMTP server on 127.0.0.1 for the email tests (``aiosmtpd``): it keeps every mail it gets.

:class:`Mailbox` can be stopped and started again on the same port (an SMTP
outage), and can require STARTTLS and a login (with a self-signed
certificate the tests' client context trusts).
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import attrs

#: How long a test waits for a mail to arrive.
MAIL_WAIT = 15.0


def _hold(port: int = 0) -> socket.socket | None:
    """A socket bound to ``port`` and not listening: a connection is refused, and no other
    server (another test, another xdist worker) can take the port while the mailbox is down."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:  # the port is in TIME_WAIT after a stop: nobody else can bind it either
        sock.close()
        return None
    return sock


@attrs.define
class Received:
    """One mail as the server got it: envelope and parsed message."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    def part(self, subtype: str) -> str:
        """The text of the ``text/<subtype>`` part."""
        found = self.message.get_body(preferencelist=(subtype,))
        assert found is not None and found.get_content_type() == f"text/{subtype}"
        text: str = found.get_content()  # type: ignore[attr-defined]
        return text

    def links(self) -> dict[str, str]:
        """``{"approve": url, "deny": url}`` from the plain-text part."""
        text = self.part("plain").replace("\r\n", "\n")
        return {
            action.lower(): url
            for action, url in re.findall(r"^(Approve|Deny): (\S+)$", text, re.MULTILINE)
        }


class _Handler:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if self.box.refuse is not None:
            return self.box.refuse
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.box.arrived.set()
        if self.box.delay:
            await asyncio.sleep(self.box.delay)
        parsed = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        with self.box.lock:
            self.box.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), parsed))
            self.box.lock.notify_all()
        return "250 OK"


def _authenticator(login: str, password: str) -> Any:
    from aiosmtpd.smtp import AuthResult, LoginPassword

    def check(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode() == login
            and data.password.decode() == password
        )
        return AuthResult(success=ok, handled=False)

    return check


class Mailbox:
    """An aiosmtpd server on 127.0.0.1 and the mails it received."""

    def __init__(self, *, tls_dir: Path | None = None, login: tuple[str, str] | None = None):
        self._held = _hold()
        assert self._held is not None
        self.port: int = self._held.getsockname()[1]
        self.received: list[Received] = []
        #: The answer to every RCPT TO when set (``"550 5.1.1 no such user"``): refused mail.
        self.refuse: str | None = None
        #: Seconds each mail's DATA waits before it is accepted.
        self.delay = 0.0
        #: Set when a mail's DATA has come in (before ``delay``): a mail in flight.
        self.arrived = threading.Event()
        self.lock = threading.Condition()
        self.login = login
        self.server_tls: ssl.SSLContext | None = None
        self.client_tls: ssl.SSLContext | None = None
        if tls_dir is not None:
            self.server_tls, self.client_tls = _tls_contexts(tls_dir)
        self._controller: Any = None

    @property
    def url(self) -> str:
        if self.login is None:
            return f"smtp://127.0.0.1:{self.port}"
        return f"smtp+starttls://{self.login[0]}@127.0.0.1:{self.port}"

    def start(self) -> Mailbox:
        from aiosmtpd.controller import Controller

        kwargs: dict[str, Any] = {}
        if self.server_tls is not None:
            kwargs.update(tls_context=self.server_tls, require_starttls=True)
        if self.login is not None:
            kwargs.update(auth_required=True, authenticator=_authenticator(*self.login))
        if self._held is not None:
            self._held.close()
            self._held = None
        self._controller = Controller(
            _Handler(self), hostname="127.0.0.1", port=self.port, **kwargs
        )
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
            self._held = _hold(self.port)

    def close(self) -> None:
        """Stop for good: the port is let go too."""
        self.stop()
        if self._held is not None:
            self._held.close()
            self._held = None

    def wait_until(self, found: Callable[[Received], bool], timeout: float = MAIL_WAIT) -> Received:
        """Block until a mail ``found`` picks arrives; that mail (fails after ``timeout``)."""
        end = time.monotonic() + timeout
        with self.lock:
            while True:
                for mail in self.received:
                    if found(mail):
                        return mail
                left = end - time.monotonic()
                assert left > 0, f"no such mail in {timeout}s ({len(self.received)} arrived)"
                self.lock.wait(left)

    def wait_for(self, n: int, timeout: float = MAIL_WAIT) -> list[Received]:
        """Block until at least ``n`` mails arrived; the mails (fails after ``timeout``)."""
        end = time.monotonic() + timeout
        with self.lock:
            while len(self.received) < n:
                left = end - time.monotonic()
                assert left > 0, f"{len(self.received)} of {n} mails arrived in {timeout}s"
                self.lock.wait(left)
            return list(self.received)


def _tls_contexts(where: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: the server's context and a client's trusting it."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = where / "smtp.pem", where / "smtp.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


class SlowGreeting:
    """A hand-rolled SMTP server that accepts a connection but greets only once told to.

    It stands for an SMTP server coming back from an outage while a mail is on its way:
    ``greet`` lets every held connection go on; ``mail_from`` counts the mails that
    reached ``MAIL FROM`` (a sender that gave up says ``QUIT`` instead).
    """

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"smtp://127.0.0.1:{self.port}"
        self.connected = threading.Event()
        self._greet = threading.Event()
        self.mail_from = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def greet(self) -> None:
        self._greet.set()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as lines:
            self.connected.set()
            self._greet.wait(30)
            conn.sendall(b"220 slow.example ESMTP\r\n")
            for line in lines:
                verb = line[:4].upper()
                if verb in (b"EHLO", b"HELO"):
                    conn.sendall(b"250 slow.example\r\n")
                elif verb == b"MAIL":
                    self.mail_from += 1
                    conn.sendall(b"250 ok\r\n")
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    conn.sendall(b"250 ok\r\n")

    def close(self) -> None:
        self._greet.set()
        self._sock.close()
