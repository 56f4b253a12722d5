"""The connection protocol on httptools: uvicorn's, with the provider's deadline, limit and 400s.

httptools (llhttp, in C) parses a request in a fraction of h11's time, so it
serves whenever it is installed (the ``server`` extra pulls it in where it
builds); ``h11.py`` is the fallback. What h11 bounds itself, this protocol
bounds here: a request head (request line and headers) may not grow past
:data:`MAX_HEAD_BYTES` while it is incomplete, so a client sending an endless
header is answered ``400`` and cut off rather than kept in memory. The head
deadline and the JSON 400s are ``connection.py``'s, as for h11.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from approval_guard.provider.http.connection import HeadDeadline, error_400
from approval_guard.provider.http.limits import MAX_HEAD_BYTES


class ProviderHttpToolsProtocol(HeadDeadline, HttpToolsProtocol):
    """One HTTP/1.1 connection to the provider, parsed by httptools."""

    # Bytes received while a head is incomplete, and whether this read ended a head or a request.
    _head_bytes = 0
    _awaiting_head = True
    _boundary = False

    def data_received(self, data: bytes) -> None:
        self._boundary = False
        super().data_received(data)
        if not self._awaiting_head or self._boundary or self.parser is None:
            # A read that ended a head or a request may hold the next head's start: that
            # start is counted from the next read on (so at most one read goes uncounted).
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self.send_400_response(f"the request head is over {MAX_HEAD_BYTES} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_head = True

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._head_bytes = 0
        self._boundary = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._awaiting_head = True
        self._head_bytes = 0
        self._boundary = True

    def send_400_response(self, msg: str) -> None:
        cycle = self.cycle
        if not self.pipeline and (
            cycle is None or not cycle.response_started or cycle.response_complete
        ):
            # Only between answers: one begun (or queued) is cut by the close alone.
            headers, body = error_400(msg)
            lines = [STATUS_LINE[400], *(b"%s: %s\r\n" % pair for pair in headers), b"\r\n", body]
            self.transport.write(b"".join(lines))
        self.transport.close()


def protocol_class(client_timeout: float) -> type[ProviderHttpToolsProtocol]:
    """The protocol for uvicorn's ``Config(http=...)``, with this head deadline."""
    return type(
        "ProviderHttpToolsProtocol",
        (ProviderHttpToolsProtocol,),
        {"client_timeout": client_timeout},
    )
