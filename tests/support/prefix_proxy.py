"""A reverse proxy on 127.0.0.1 serving the provider under a path (``/approvals``), as nginx would.

``http://127.0.0.1:PORT/approvals/x`` is passed on to ``TARGET/x`` (method,
headers, body), and the answer comes back as it was; anything outside the
prefix is ``404``. So a ``--public-url`` with a path can be tested end to end.
"""

from __future__ import annotations

import http.server
from typing import Any

import httpx

from tests.support.serving import BurstServer, serve_in_thread

_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


class PrefixProxy:
    """Run with ``with PrefixProxy(target, "/approvals") as proxy:``; the base is ``proxy.url``."""

    def __init__(self, target: str, prefix: str) -> None:
        self.target = target.rstrip("/")
        self.prefix = prefix.rstrip("/")
        #: Each path asked for, as it arrived (prefix included).
        self.paths: list[str] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _pass(self) -> None:
                proxy.paths.append(self.path)
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length) if length else b""
                if not self.path.startswith(proxy.prefix + "/"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                with httpx.Client(trust_env=False, timeout=10.0) as client:
                    answer = client.request(
                        self.command,
                        proxy.target + self.path[len(proxy.prefix) :],
                        headers=headers,
                        content=body,
                    )
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() not in _HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = _pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = BurstServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> PrefixProxy:
        serve_in_thread(self.server)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
