"""A fake Slack Web API for the tests: a real ``http.server`` on 127.0.0.1 that records each call.

It answers ``chat.postMessage``, ``chat.update``, ``views.open`` and
``chat.postEphemeral`` as Slack does (``{"ok": true, "channel", "ts"}``...),
accepts JSON or form bodies as ``slack_sdk.WebClient`` sends them, checks the
bearer token (``invalid_auth`` otherwise), and keeps each message's latest
text and blocks. ``script`` is consumed one answer per call (status, body,
headers), e.g. ``(429, {"ok": False, "error": "ratelimited"}, {"Retry-After":
"1"})``; ``down`` answers every call ``503``.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

import attrs

from tests.support.serving import BurstServer, serve_in_thread, wait_on

TOKEN = "xoxb-1234-5678-faketoken"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@attrs.define
class Call:
    method: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int
    at: float


Answer = tuple[int, dict[str, Any], dict[str, str]]


class FakeSlack:
    """Run with ``with FakeSlack() as slack: ... slack.api_url``."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.script: list[Answer] = []
        self.down = False
        #: Seconds each answer waits (a slow Slack).
        self.delay = 0.0
        #: Set when a call has come in (before ``delay``): a call in flight.
        self.arrived = threading.Event()
        #: (channel, ts) -> {"text", "blocks"}: each message as it is now.
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self._ts = 0
        self._lock = threading.Condition()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                method = self.path.rsplit("/", 1)[-1]
                headers = {name.lower(): value for name, value in self.headers.items()}
                if headers.get("content-type", "").startswith("application/json"):
                    body = json.loads(raw or b"{}")
                else:
                    form = parse_qs(raw.decode("utf-8"))
                    body = {key: values[0] for key, values in form.items()}
                    for key in ("blocks", "view"):
                        if isinstance(body.get(key), str):
                            body[key] = json.loads(body[key])
                fake.arrived.set()
                if fake.delay:
                    time.sleep(fake.delay)
                status, answer, extra = fake._answer(method, headers, body)
                out = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(out)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = BurstServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.api_url = f"http://127.0.0.1:{self.server.server_port}/api/"

    def _answer(self, method: str, headers: dict[str, str], body: dict[str, Any]) -> Answer:
        with self._lock:
            status, answer, extra = self._reply(method, headers, body)
            self.calls.append(Call(method, headers, body, status, time.monotonic()))
            self._lock.notify_all()
            return status, answer, extra

    def _reply(self, method: str, headers: dict[str, str], body: dict[str, Any]) -> Answer:
        if self.down:
            return 503, {"ok": False, "error": "service_unavailable"}, {}
        if self.script:
            return self.script.pop(0)
        if headers.get("authorization") != f"Bearer {self.token}":
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        if method == "chat.postMessage":
            self._ts += 1
            channel = str(body["channel"])
            ts = f"1700000000.{self._ts:06d}"
            self.messages[(channel, ts)] = {"text": body.get("text"), "blocks": body.get("blocks")}
            return 200, {"ok": True, "channel": channel, "ts": ts, "message": {}}, {}
        if method == "chat.update":
            key = (str(body.get("channel")), str(body.get("ts")))
            if key not in self.messages:
                return 200, {"ok": False, "error": "message_not_found"}, {}
            self.messages[key] = {"text": body.get("text"), "blocks": body.get("blocks")}
            return 200, {"ok": True, "channel": key[0], "ts": key[1], "text": body.get("text")}, {}
        if method == "views.open":
            return 200, {"ok": True, "view": {"id": "V0001", **(body.get("view") or {})}}, {}
        if method == "chat.postEphemeral":
            return 200, {"ok": True, "message_ts": "1700000001.000001"}, {}
        return 200, {"ok": False, "error": "unknown_method"}, {}

    # ---------------------------------------------------------------- for the tests

    def of(self, method: str) -> list[Call]:
        with self._lock:
            return [call for call in self.calls if call.method == method]

    def wait_for(self, predicate: Callable[[FakeSlack], bool], timeout: float = 10.0) -> bool:
        """Block until ``predicate(self)`` holds (checked on every call); False on timeout."""
        return wait_on(self._lock, lambda: predicate(self), timeout)

    def wait_calls(self, method: str, n: int = 1, timeout: float = 10.0) -> list[Call]:
        assert self.wait_for(lambda s: len(s.of(method)) >= n, timeout), (
            f"expected {n} {method} calls, got {[c.method for c in self.calls]}"
        )
        return self.of(method)

    def ephemeral_texts(self) -> list[str]:
        return [str(call.body.get("text")) for call in self.of("chat.postEphemeral")]

    def only_message(self) -> dict[str, Any]:
        with self._lock:
            assert len(self.messages) == 1, self.messages
            return next(iter(self.messages.values()))

    def __enter__(self) -> FakeSlack:
        serve_in_thread(self.server)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def fake_slack() -> Iterator[FakeSlack]:
    with FakeSlack() as slack:
        yield slack
