"""A webhook receiver for the tests: a real ``http.server`` on 127.0.0.1, in a thread.

It records every delivery (headers and raw body) and answers from a script:
``statuses`` is consumed one per delivery (then 200 for good); ``hold`` keeps
every answer back until it is set.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from tests.support.serving import BurstServer, serve_in_thread


@attrs.define
class Delivery:
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]


class Receiver:
    """Run with ``with Receiver() as hook: ... hook.url``."""

    def __init__(self, statuses: list[int] | None = None, *, port: int = 0) -> None:
        self.statuses = list(statuses or [])
        self.deliveries: list[Delivery] = []
        self.hold: threading.Event | None = None
        #: Headers every answer carries (a ``Retry-After``).
        self.answer_headers: dict[str, str] = {}
        #: Seconds each answer waits (so that racing deliverers would overlap).
        self.delay = 0.0
        #: Set when a delivery has come in (before ``hold``/``delay``): one in flight.
        self.arrived = threading.Event()
        self._lock = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.arrived.set()
                if receiver.hold is not None:
                    receiver.hold.wait(30)
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver._lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    headers = {name.lower(): value for name, value in self.headers.items()}
                    receiver.deliveries.append(Delivery(headers, body, status))
                    receiver._lock.notify_all()
                self.send_response(status)
                for name, value in receiver.answer_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = BurstServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        path = "/hook" if port else "/hooks/approvals"
        self.url = f"http://127.0.0.1:{self.server.server_port}{path}"

    def __enter__(self) -> Receiver:
        serve_in_thread(self.server)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()

    def wait_for(
        self, predicate: Callable[[list[Delivery]], bool], timeout: float = 20.0
    ) -> list[Delivery]:
        """Block until ``predicate(deliveries)``; the deliveries (AssertionError on timeout)."""
        end = time.monotonic() + timeout
        with self._lock:
            while not predicate(self.deliveries):
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; got {len(self.deliveries)} deliveries")
                self._lock.wait(left)
            return list(self.deliveries)

    def wait_count(self, n: int, timeout: float = 20.0) -> list[Delivery]:
        return self.wait_for(lambda got: len(got) >= n, timeout)

    def ok(self) -> Iterator[Delivery]:
        return (d for d in list(self.deliveries) if 200 <= d.status < 300)
