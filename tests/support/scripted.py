"""A scripted HTTP server on 127.0.0.1, and a proxy that rewrites the local provider's answers.

Fixture ``servers``: the servers a test starts, closed after it.
"""

from __future__ import annotations

import http.client
import http.server
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

import approval_guard as ag
from tests.support.serving import BurstServer, serve_in_thread

# Has characters that URL-encoding changes, so every encoded form differs.
SECRET = "agi_s3cret/t0ken+never=shown_123"


@attrs.define
class Reply:
    """An HTTP answer as a test server sends it, byte for byte."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


Handler = Callable[[str, str, dict[str, str], bytes], Reply]


class ScriptedServer:
    """A tiny HTTP server on 127.0.0.1 whose every answer is ``handler``'s (one per connection)."""

    def __init__(self, handler: Handler) -> None:
        outer = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                reply = handler(self.command, self.path, dict(self.headers.items()), body)
                self.send_response_only(reply.status)
                names = {name.lower() for name, _ in reply.headers}
                for name, value in reply.headers:
                    self.send_header(name, value)
                if "content-length" not in names:
                    self.send_header("Content-Length", str(len(reply.body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(reply.body)
                self.close_connection = True

            do_GET = do_POST = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = BurstServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(outer.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def forward(upstream: str, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    """Send the request on to ``upstream`` and return its answer unchanged."""
    parts = urllib.parse.urlsplit(upstream)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=70)
    try:
        sent = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
        conn.request(method, path, body=body or None, headers=sent)
        response = conn.getresponse()
        return Reply(response.status, response.getheaders(), response.read())
    finally:
        conn.close()


@pytest.fixture
def servers() -> Iterator[list[ScriptedServer]]:
    started: list[ScriptedServer] = []
    yield started
    for server in started:
        server.close()


def rewriting_proxy(
    servers: list[ScriptedServer], upstream: str, rewrite: Callable[[str, str, Reply], Reply]
) -> str:
    """The URL of a proxy in front of ``upstream`` that passes each answer through ``rewrite``."""

    def handle(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        reply = forward(upstream, method, path, headers, body)
        reply.headers = [(k, v) for k, v in reply.headers if k.lower() != "content-length"]
        return rewrite(method, path, reply)

    server = ScriptedServer(handle)
    servers.append(server)
    return server.url


def set_header(reply: Reply, name: str, value: str) -> Reply:
    reply.headers = [(k, v) for k, v in reply.headers if k.lower() != name.lower()]
    reply.headers.append((name, value))
    return reply


def is_create(method: str, path: str) -> bool:
    return method == "POST" and urllib.parse.urlsplit(path).path == "/v1/requests"


def quick_guard(url: str, credential: str, **options: Any) -> ag.Guard:
    settings: dict[str, Any] = {
        "base_url": url,
        "credential": credential,
        "harness_limit": "4s",
        "poll_wait": "1s",
        "return_margin": "1s",
        "deadline_margin": "1s",
    }
    settings.update(options)
    return ag.Guard(**settings)
