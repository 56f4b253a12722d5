"""What the provider adds to each of uvicorn's connection protocols: a head deadline, JSON 400s.

A client that takes longer than :data:`SLOW_CLIENT_SECONDS` (the server's
``client_timeout``) to send a request head is disconnected, so a slow-drip
client cannot hold a connection open forever (the event loop never waits on
it, so it delays nobody meanwhile). A request uvicorn cannot parse is answered
in the API's JSON error shape, not uvicorn's plain text. Each answer's head
and body leave in one write (:class:`~approval_guard.provider.http.one_write.OneWrite`).
The protocols themselves: ``h11.py`` and ``httptools_protocol.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, cast

from approval_guard._codec.now import utcnow
from approval_guard._codec.wire import format_http_date
from approval_guard._codec.wire_models import error_body
from approval_guard.provider.http.limits import SLOW_CLIENT_SECONDS
from approval_guard.provider.http.one_write import OneWrite


def error_400(message: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body of a JSON ``400 invalid_request`` that closes the connection."""
    body = json.dumps(error_body("invalid_request", message)).encode()
    headers = [
        (b"Content-Type", b"application/json"),
        (b"Content-Length", str(len(body)).encode()),
        (b"X-Request-ID", str(uuid.uuid4()).encode()),
        (b"Date", format_http_date(utcnow()).encode()),
        (b"Cache-Control", b"no-store"),
        (b"Connection", b"close"),
    ]
    return headers, body


class HeadDeadline:
    """Mixed into a uvicorn protocol (before it): the head deadline and the one-write transport.

    The uvicorn class supplies ``loop``, ``transport`` and ``cycle``.
    """

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any
    _head_timer: asyncio.TimerHandle | None = None
    #: Seconds a client has to send a request head (see ``protocol_class``).
    client_timeout: float = SLOW_CLIENT_SECONDS

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        # Each answer's head and body in one send (flow control still sees the real transport).
        self.transport = OneWrite(cast(asyncio.Transport, transport), self, self.loop)
        self._arm_head_timer()

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.client_timeout, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        # A request being answered (a long poll, say) is the app's business, not a slow head.
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)  # type: ignore[misc]
