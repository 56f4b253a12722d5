"""A reverse proxy on 127.0.0.1 that serves an upstream under a path prefix, as nginx would.

``location /approvals/ { proxy_pass http://127.0.0.1:8765/; }``: a request for
``/approvals/X`` is sent upstream as ``/X`` (its ``Host`` header kept, as
``proxy_set_header Host $host`` does), ``/approvals`` is redirected to
``/approvals/``, and anything else is 404: a URL that lost the prefix fails here
as it would behind the real proxy.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.support.serving import BurstServer, serve_in_thread

#: Headers of one connection, never passed on.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
    }
)


class PrefixProxy:
    """``http://127.0.0.1:PORT/PREFIX/*`` to ``upstream/*``; :attr:`seen` lists the paths asked."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.rstrip("/")
        self.upstream: str | None = None
        #: (method, path as the browser asked for it, status answered), in order.
        self.seen: list[tuple[str, str, int]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _relay(self) -> None:
                status = owner.relay(self)
                owner.seen.append((self.command, self.path, status))

            do_GET = do_POST = do_HEAD = _relay

        self.server = BurstServer(("127.0.0.1", 0), Handler)

    @property
    def base(self) -> str:
        """The provider's address through the proxy: ``http://127.0.0.1:PORT/PREFIX``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.prefix}"

    def relay(self, handler: BaseHTTPRequestHandler) -> int:
        """Answer one request: redirect, 404, or the upstream's answer to the path unprefixed."""
        path = handler.path
        if path == self.prefix or path.startswith(f"{self.prefix}?"):
            return self._answer(handler, 301, b"", [("Location", f"{self.prefix}/")])
        if not path.startswith(f"{self.prefix}/") or self.upstream is None:
            return self._answer(handler, 404, b"not behind this proxy's prefix", [])
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        target = urlsplit(self.upstream)
        connection = http.client.HTTPConnection(target.hostname or "", target.port, timeout=30)
        try:
            connection.putrequest(
                handler.command, path[len(self.prefix) :], skip_host=True, skip_accept_encoding=True
            )
            for name, value in handler.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    connection.putheader(name, value)
            connection.endheaders(body)
            answer = connection.getresponse()
            data = answer.read()
            headers = [
                (name, value)
                for name, value in answer.getheaders()
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length"
            ]
            return self._answer(handler, answer.status, data, headers)
        finally:
            connection.close()

    @staticmethod
    def _answer(
        handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: list[tuple[str, str]]
    ) -> int:
        handler.send_response_only(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)
        return status


@contextmanager
def prefix_proxy(prefix: str) -> Iterator[PrefixProxy]:
    """A :class:`PrefixProxy` serving (its upstream set later), shut down after."""
    proxy = PrefixProxy(prefix)
    serve_in_thread(proxy.server)
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
