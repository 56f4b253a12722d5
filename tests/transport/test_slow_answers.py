"""A provider that drips its answer a byte at a time cannot stretch a call's wait, sync or async.

Each read is within its timeout, so only the call's own deadline can end it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.wire import format_http_date, format_timestamp
from tests.support.guards import refund_tool


class DrippingProvider:
    """A provider on a raw socket that answers creates at once and drips chosen answers."""

    def __init__(self, drip: str) -> None:
        self.drip = drip  # "create" or "poll": which answer comes a byte at a time
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.methods: list[str] = []
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode()
            length = next(
                (
                    int(h.split(b":")[1])
                    for h in head.split(b"\r\n")
                    if h.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(rest) < length:
                rest += conn.recv(65536)
            method, path = line.split()[:2]
            self.methods.append(f"{method} {path.split('?')[0].rsplit('/', 1)[-1]}")
            now = datetime.now(timezone.utc)
            request = {
                "id": "r1",
                "tool": "issue_refund",
                "arguments": {"payment_id": "p", "amount": 1, "currency": "GBP"},
                "timeout": "1m",
                "status": "pending",
                "created_at": format_timestamp(now),
                "deadline_at": format_timestamp(now + timedelta(minutes=1)),
            }
            if path.endswith("/cancel"):
                request["status"] = "cancelled"
                request["cancelled_at"] = format_timestamp(now)
            body = json.dumps(request).encode()
            kind = "create" if path == "/v1/requests" else "poll" if method == "GET" else "cancel"
            status = "201 Created" if kind == "create" else "200 OK"
            header = (
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Date: {format_http_date(now)}\r\nX-Request-ID: {uuid.uuid4()}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            try:
                conn.sendall(header)
                if kind == self.drip:
                    for byte in body:
                        if self.stop.wait(0.3):
                            return
                        conn.sendall(bytes([byte]))
                else:
                    conn.sendall(body)
            except OSError:
                return


@pytest.fixture(params=["create", "poll"])
def dripping(request: pytest.FixtureRequest) -> Iterator[DrippingProvider]:
    provider = DrippingProvider(request.param)
    yield provider
    provider.stop.set()
    provider.sock.close()


def test_a_dripping_answer_cannot_stretch_the_wait(dripping: DrippingProvider) -> None:
    """An answer sent a byte at a time (each read within its timeout) still ends on time."""
    guard = ag.Guard(
        base_url=dripping.url,
        credential="agi_x",
        harness_limit="4s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
    )
    ran: list[Any] = []
    started = time.monotonic()
    out = refund_tool(guard, ran)("p", 1)
    assert time.monotonic() - started < 4.0
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran


def test_a_dripping_answer_cannot_stretch_an_async_wait(dripping: DrippingProvider) -> None:
    """An answer sent a byte at a time still ends on time on the async path."""
    guard = ag.Guard(
        base_url=dripping.url,
        credential="agi_x",
        harness_limit="4s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
    )
    ran: list[Any] = []

    @guard.requires_approval(timeout="1m")
    async def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> str:
        ran.append(payment_id)
        return payment_id

    started = time.monotonic()
    out = asyncio.run(issue_refund("p", 1))
    assert time.monotonic() - started < 4.0
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran
