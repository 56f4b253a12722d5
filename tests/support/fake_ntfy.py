"""A fake ntfy server for the tests: real HTTP on 127.0.0.1, ntfy's JSON publish, and a phone.

It accepts what ntfy's server accepts when a message is published as JSON
(``POST /`` with ``{"topic", "title", "message", "tags", "priority",
"actions", "click"}``): at most 8,192 bytes of JSON, a topic matching ntfy's
``[-_A-Za-z0-9]{1,64}``, a message of at most 4,096 bytes, at most three actions, each ``view`` /
``broadcast`` / ``http`` with a label (and a URL for ``http`` / ``view``);
anything else is ntfy's JSON error (``{"code", "http", "error"}``). With a
``token`` every publish needs ``Authorization: Bearer <token>`` (``401``
otherwise, as ntfy answers). Each publish is recorded; :meth:`FakeNtfy.tap`
then performs one of its actions exactly as the ntfy app does: the action's
``method`` (``POST`` by default), its ``headers`` and its ``body``, to its
``url``. ``script`` answers the next publishes (status, body, headers);
``down`` answers ``503``; clearing ``hold`` keeps publishes in flight.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import httpx

from tests.support.serving import BurstServer, serve_in_thread, wait_on

TOKEN = "tk_fakentfytoken0123456789abcde"
_TOPIC = re.compile(r"[-_A-Za-z0-9]{1,64}")
_FIELDS = {
    "topic",
    "title",
    "message",
    "priority",
    "tags",
    "click",
    "icon",
    "actions",
    "attach",
    "markdown",
    "filename",
    "email",
    "call",
    "cache",
    "firebase",
    "delay",
}
#: The ntfy Android app's user agent for its HTTP actions.
PHONE_AGENT = "ntfy/1.16.0 (fdroid; Android 14; SDK 34)"

Answer = tuple[int, dict[str, Any], dict[str, str]]


@attrs.frozen
class Publish:
    """One accepted (or refused) publish: the JSON, the headers, ntfy's status."""

    body: dict[str, Any]
    headers: dict[str, str]
    status: int
    at: float

    @property
    def topic(self) -> str:
        return str(self.body.get("topic"))

    def action(self, label: str) -> dict[str, Any]:
        found = [one for one in self.body.get("actions") or () if one.get("label") == label]
        assert len(found) == 1, self.body.get("actions")
        return dict(found[0])


@attrs.frozen
class Tapped:
    """What the provider answered the phone's action request."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def _error(status: int, code: int, text: str) -> Answer:
    return status, {"code": code, "http": status, "error": text}, {}


class FakeNtfy:
    """Run with ``with FakeNtfy() as ntfy: ... ntfy.url``."""

    def __init__(self, token: str | None = TOKEN) -> None:
        self.token = token
        self.publishes: list[Publish] = []
        self.script: list[Answer] = []
        self.down = False
        #: Set when a publish has come in (before :attr:`hold`): a publish in flight.
        self.arrived = threading.Event()
        #: While not set, each publish waits for it before it is answered (a slow ntfy).
        self.hold = threading.Event()
        self.hold.set()
        self._lock = threading.Condition()
        self._ids = 0
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                fake.arrived.set()
                fake.hold.wait(30)
                status, answer, extra = fake._answer(self.path, headers, raw)
                out = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(out)

            do_PUT = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = BurstServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    # ---------------------------------------------------------------- the server

    def _answer(self, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            if len(raw) > 2 * 4096:  # ntfy reads at most twice the message limit as JSON
                status, answer, extra = _error(413, 41303, "JSON body too large")
            else:
                status, answer, extra = self._reply(path, headers, body)
            if isinstance(body, dict):
                self.publishes.append(Publish(body, headers, status, time.monotonic()))
            self._lock.notify_all()
            return status, answer, extra

    def _reply(self, path: str, headers: dict[str, str], body: object) -> Answer:
        if self.down:
            return _error(503, 50301, "service unavailable")
        if self.script:
            return self.script.pop(0)
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return _error(401, 40101, "unauthorized")
        if path != "/":
            return _error(400, 40010, "invalid request: publish JSON to the root URL")
        if not isinstance(body, dict) or set(body) - _FIELDS:
            return _error(400, 40024, "invalid request: request body must be valid JSON")
        topic = body.get("topic")
        if not isinstance(topic, str) or _TOPIC.fullmatch(topic) is None:
            return _error(400, 40009, "invalid request: topic invalid")
        text = body.get("message", "")
        if not isinstance(text, str) or len(text.encode("utf-8")) > 4096:
            return _error(413, 41301, "too large for the JSON message")
        if body.get("priority", 3) not in (1, 2, 3, 4, 5):
            return _error(400, 40007, "invalid request: priority invalid")
        actions = body.get("actions") or []
        if not isinstance(actions, list) or len(actions) > 3 or not all(map(_valid, actions)):
            return _error(400, 40018, "invalid request: actions invalid")
        self._ids += 1
        message = {
            "id": f"msg{self._ids:09d}",
            "time": int(time.time()),
            "expires": int(time.time()) + 43200,
            "event": "message",
            "topic": topic,
            "message": text or "triggered",
        }
        for key in ("title", "tags", "priority", "click", "actions"):
            if key in body:
                message[key] = body[key]
        return 200, message, {}

    # ---------------------------------------------------------------- the phone

    def tap(self, publish: Publish, label: str, **change: Any) -> Tapped:
        """Perform ``label``'s action as the ntfy app does (``change`` edits it first)."""
        action = {**publish.action(label), **change}
        assert action["action"] == "http", action
        headers = {"User-Agent": PHONE_AGENT, **(action.get("headers") or {})}
        method = action.get("method") or "POST"
        content = action.get("body", "" if method not in ("GET", "HEAD") else None)
        with httpx.Client(trust_env=False, timeout=10.0) as client:
            answer = client.request(
                method,
                action["url"],
                headers=headers,
                content=None if content is None else content.encode("utf-8"),
            )
        try:
            said = answer.json()
        except ValueError:
            said = {"raw": answer.text}
        said = said if isinstance(said, dict) else {}
        return Tapped(answer.status_code, said, dict(answer.headers))

    # ---------------------------------------------------------------- for the tests

    def accepted(self, topic: str | None = None) -> list[Publish]:
        """The publishes ntfy accepted (to ``topic``), in order."""
        with self._lock:
            return [
                one
                for one in self.publishes
                if one.status == 200 and (topic is None or one.topic == topic)
            ]

    def wait_for(self, predicate: Callable[[FakeNtfy], bool], timeout: float = 10.0) -> bool:
        """Block until ``predicate(self)`` holds (checked on every publish); False on timeout."""
        return wait_on(self._lock, lambda: predicate(self), timeout)

    def wait_accepted(self, n: int = 1, topic: str | None = None) -> list[Publish]:
        """The first ``n`` accepted publishes (to ``topic``), once there are that many."""
        assert self.wait_for(lambda s: len(s.accepted(topic)) >= n), self.publishes
        return self.accepted(topic)

    def __enter__(self) -> FakeNtfy:
        serve_in_thread(self.server)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _valid(action: object) -> bool:
    if not isinstance(action, dict) or not isinstance(action.get("label"), str):
        return False
    kind = action.get("action")
    if kind in ("view", "http"):
        return isinstance(action.get("url"), str) and bool(action["url"])
    return kind == "broadcast"


def fake_ntfy() -> Iterator[FakeNtfy]:
    with FakeNtfy() as ntfy:
        yield ntfy
