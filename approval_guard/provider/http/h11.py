"""The connection protocol on h11: uvicorn's, with the provider's head deadline and JSON 400s.

The pure-Python parser, used when ``httptools`` is not installed
(``httptools_protocol.py`` is the other; ``connection.py`` what both add).
uvicorn bounds an incomplete head at ``h11_max_incomplete_event_size``.
"""

from __future__ import annotations

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from approval_guard.provider.http.connection import HeadDeadline, error_400


class ProviderH11Protocol(HeadDeadline, H11Protocol):
    """One HTTP/1.1 connection to the provider, parsed by h11."""

    def send_400_response(self, msg: str) -> None:
        headers, body = error_400(msg)
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
