"""The connection protocol: uvicorn's h11 one, with JSON 400s and a deadline for slow clients.

uvicorn answers a request it cannot parse (a malformed request line, a head
over the size limit, a bad ``Content-Length``) with a plain-text 400; here it
is the API's JSON error shape. A client that takes longer than
:data:`SLOW_CLIENT_SECONDS` to send a request head is disconnected, so a
slow-drip client cannot hold a connection open forever (the event loop never
waits on it, so it delays nobody meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from approval_guard._codec.now import utcnow
from approval_guard._codec.wire import format_http_date
from approval_guard._codec.wire_models import error_body
from approval_guard.provider.http.limits import SLOW_CLIENT_SECONDS
from approval_guard.provider.http.one_write import OneWrite


class ProviderH11Protocol(H11Protocol):
    """One HTTP/1.1 connection to the provider."""

    _head_timer: asyncio.TimerHandle | None = None
    #: Seconds a client has to send a request head (see :func:`protocol_class`).
    client_timeout: float = SLOW_CLIENT_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # Each answer's head and body in one send (flow control still sees the real transport).
        self.transport = OneWrite(transport, self, self.loop)
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
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        body = json.dumps(error_body("invalid_request", msg)).encode()
        headers: list[tuple[bytes, bytes]] = [
            (b"Content-Type", b"application/json"),
            (b"Content-Length", str(len(body)).encode()),
            (b"X-Request-ID", str(uuid.uuid4()).encode()),
            (b"Date", format_http_date(utcnow()).encode()),
            (b"Cache-Control", b"no-store"),
            (b"Connection", b"close"),
        ]
        try:
            response = h11.Response(status_code=400, headers=headers, reason=b"Bad Request")
            output = self.conn.send(response) or b""
            output += self.conn.send(h11.Data(data=body)) or b""
            output += self.conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            output = None  # an answer had already begun: just close
        if output:
            self.transport.write(output)
        self.transport.close()


def protocol_class(client_timeout: float) -> type[ProviderH11Protocol]:
    """The protocol for uvicorn's ``Config(http=...)``, with this head deadline."""
    return type("ProviderH11Protocol", (ProviderH11Protocol,), {"client_timeout": client_timeout})
