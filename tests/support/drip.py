"""A hostile webhook receiver: it reads the request, then drips its answer one byte at a time.

Each connection is recorded with its ``webhook-id``, when it opened and when
the provider closed it, so a test can show that a send is cut at its deadline,
that one target never holds more than its share of connections, and that no
item is ever posted twice at once.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from typing import Any

import attrs


@attrs.define
class Connection:
    webhook_id: str
    opened: float
    closed: float | None = None


class DripReceiver:
    """Run with ``with DripReceiver(every=0.5) as drip: ... drip.url``."""

    def __init__(self, every: float = 0.5) -> None:
        self.every = every
        self.connections: list[Connection] = []
        self.most_open = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/drip"
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> DripReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def open_now(self) -> list[Connection]:
        with self._lock:
            return [one for one in self.connections if one.closed is None]

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
        except OSError:
            conn.close()
            return
        headers: dict[str, Any] = {}
        for line in head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        record = Connection(webhook_id=str(headers.get("webhook-id", "")), opened=time.monotonic())
        with self._lock:
            self.connections.append(record)
            self.most_open = max(self.most_open, len(self.open_now_locked()))
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not self._stop.is_set():
                # Waits for the next byte's time, and sees at once a close by the provider.
                readable, _, _ = select.select([conn], [], [], self.every)
                if readable and not conn.recv(65536):
                    break
                conn.sendall(b".")
        except OSError:
            pass
        finally:
            with self._lock:
                record.closed = time.monotonic()
            conn.close()

    def open_now_locked(self) -> list[Connection]:
        return [one for one in self.connections if one.closed is None]
