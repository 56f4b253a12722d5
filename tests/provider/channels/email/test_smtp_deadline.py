"""An SMTP server that answers a byte at a time cannot keep a send open past its deadline."""

from __future__ import annotations

import socket
import threading
import time
from email.message import EmailMessage

import pytest

from approval_guard.provider.channels.email.smtp import parse_smtp_url, send


def test_a_dripping_greeting_is_cut_at_the_sessions_deadline() -> None:
    """Each byte in time, the greeting never whole: the send ends at its deadline."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        conn, _ = listener.accept()
        with conn:
            for byte in b"220 slow.example ESMTP ready, one byte at a time\r\n" * 10:
                if stop.wait(0.3):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    threading.Thread(target=drip, daemon=True).start()
    server = parse_smtp_url(f"smtp://127.0.0.1:{listener.getsockname()[1]}", environ={})
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "x"
    started = time.monotonic()
    try:
        with pytest.raises((OSError, ConnectionError)):
            send(server, message, timeout=5.0, deadline=1.5)
    finally:
        stop.set()
        listener.close()
    assert time.monotonic() - started < 4.0
