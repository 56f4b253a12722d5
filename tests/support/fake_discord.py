"""A fake Discord for the tests: its REST API on 127.0.0.1, and its signed interaction posts.

The API answers Create Message (``POST /api/v10/channels/{id}/messages``) and
Edit Message (``PATCH .../messages/{id}``) as Discord does: the message object
(snowflake ids), ``401 {"message": "401: Unauthorized", "code": 0}`` for a
wrong ``Authorization: Bot TOKEN``, ``404 {"message": "Unknown Message",
"code": 10008}`` for a message it does not have; an edit changes only the
fields it is given; a Create Message with ``enforce_nonce`` and a ``nonce``
it has seen returns that message instead of making another. Each call is
recorded. ``script`` is consumed one answer per call (status, body,
headers), e.g. :data:`RATE_LIMITED`; ``down`` answers every call ``502``;
:meth:`hold` keeps answers back (a call in flight).

Discord's other side posts interactions to the provider the way Discord
does: JSON signed with the application's Ed25519 private key (a real key made
per fake) over ``timestamp + body``, in ``X-Signature-Ed25519`` and
``X-Signature-Timestamp``.
"""

from __future__ import annotations

import http.server
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.support.serving import BurstServer, serve_in_thread, wait_on

TOKEN = "MTA5ODc2NTQzMjEwOTg3NjU0.GfakeX.discord-bot-token-for-tests_0123"
CHANNEL = "1100000000000000001"
GUILD = "1200000000000000001"
APPLICATION = "1300000000000000001"
#: A ``429`` as Discord sends it: a JSON ``retry_after`` and a ``Retry-After`` header.
RATE_LIMITED: tuple[int, dict[str, Any], dict[str, str]] = (
    429,
    {"message": "You are being rate limited.", "retry_after": 0.25, "global": False},
    {"Retry-After": "1", "X-RateLimit-Scope": "user"},
)
UNAUTHORIZED: tuple[int, dict[str, Any], dict[str, str]] = (
    401,
    {"message": "401: Unauthorized", "code": 0},
    {},
)
_PATH = re.compile(r"/api/v10/channels/([0-9]+)/messages(?:/([0-9]+))?")


@attrs.define
class Call:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int
    at: float


Answer = tuple[int, dict[str, Any], dict[str, str]]


class FakeDiscord:
    """Run with ``with FakeDiscord() as discord: ... discord.api_url``."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.private_key = Ed25519PrivateKey.generate()
        self.public_key = (
            self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
        )
        self.calls: list[Call] = []
        self.script: list[Answer] = []
        self.down = False
        #: While True, each call waits (in flight) until :meth:`hold` lets it go.
        self.holding = False
        #: Set when a call has come in: a call in flight (see :meth:`hold`).
        self.arrived = threading.Event()
        self._released = threading.Event()
        #: How many calls have come in (counted before any hold).
        self.arrivals = 0
        #: message id -> the message object as it is now.
        self.messages: dict[str, dict[str, Any]] = {}
        #: a Create Message's nonce -> the id of the message it made.
        self.nonces: dict[str, str] = {}
        self._ids = itertools.count(1400000000000000001)
        self._lock = threading.Condition()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                with fake._lock:
                    fake.arrivals += 1
                    fake._lock.notify_all()
                fake.arrived.set()
                if fake.holding:
                    fake._released.wait(60)
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {"unreadable": raw.decode("utf-8", "replace")}
                status, answer, extra = fake._answer(self.command, self.path, headers, body)
                out = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(out)

            do_POST = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = BurstServer(("127.0.0.1", 0), Handler)
        self.api_url = f"http://127.0.0.1:{self.server.server_port}/api/v10"

    # ---------------------------------------------------------------- the REST API

    def _answer(
        self, method: str, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> Answer:
        with self._lock:
            status, answer, extra = self._reply(method, path, headers, body)
            self.calls.append(Call(method, path, headers, body, status, time.monotonic()))
            self._lock.notify_all()
            return status, answer, extra

    def _reply(
        self, method: str, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> Answer:
        if self.down:
            return 502, {"message": "Bad Gateway", "code": 0}, {}
        if self.script:
            return self.script.pop(0)
        if headers.get("authorization") != f"Bot {self.token}":
            return UNAUTHORIZED
        found = _PATH.fullmatch(path)
        if found is None:
            return 404, {"message": "404: Not Found", "code": 0}, {}
        channel, message_id = found.groups()
        if channel != CHANNEL:
            return 404, {"message": "Unknown Channel", "code": 10003}, {}
        if method == "POST" and message_id is None:
            nonce = body.get("nonce")
            if body.get("enforce_nonce") and isinstance(nonce, (str, int)):
                if len(str(nonce)) > 25:
                    return 400, {"message": "Invalid Form Body", "code": 50035}, {}
                if str(nonce) in self.nonces:
                    return 200, self.messages[self.nonces[str(nonce)]], {}
            new = {
                "id": str(next(self._ids)),
                "type": 0,
                "channel_id": channel,
                "author": {"id": APPLICATION, "username": "approvals", "bot": True},
                "content": body.get("content", ""),
                "embeds": body.get("embeds", []),
                "components": body.get("components", []),
                "timestamp": "2026-12-05T20:00:00.000000+00:00",
                "edited_timestamp": None,
            }
            self.messages[new["id"]] = new
            if body.get("enforce_nonce") and isinstance(nonce, (str, int)):
                self.nonces[str(nonce)] = new["id"]
            return 200, new, {}
        if method == "PATCH" and message_id is not None:
            if message_id not in self.messages:
                return 404, {"message": "Unknown Message", "code": 10008}, {}
            kept = self.messages[message_id]
            for field in ("content", "embeds", "components"):
                if field in body:
                    kept[field] = body[field]
            kept["edited_timestamp"] = "2026-12-05T20:00:01.000000+00:00"
            return 200, kept, {}
        return 405, {"message": "405: Method Not Allowed", "code": 0}, {}

    # ---------------------------------------------------------------- for the tests

    def hold(self, on: bool) -> None:
        """Keep answers back (a call stays in flight) while ``on``; let them all go when not."""
        if on:
            self._released.clear()
            self.arrived.clear()
            self.holding = True
        else:
            self.holding = False
            self._released.set()

    def deliveries(self) -> int:
        """How many calls reached the API."""
        with self._lock:
            return len(self.calls)

    def of(self, method: str) -> list[Call]:
        with self._lock:
            return [call for call in self.calls if call.method == method]

    def wait_for(self, predicate: Callable[[FakeDiscord], bool], timeout: float = 15.0) -> bool:
        """Block until ``predicate(self)`` holds (checked on every call); False on timeout."""
        return wait_on(self._lock, lambda: predicate(self), timeout)

    def wait_calls(self, method: str, n: int = 1, timeout: float = 15.0) -> list[Call]:
        assert self.wait_for(lambda s: len(s.of(method)) >= n, timeout), (
            f"expected {n} {method} calls, got {[(c.method, c.status) for c in self.calls]}"
        )
        return self.of(method)

    def only_message(self) -> dict[str, Any]:
        with self._lock:
            assert len(self.messages) == 1, self.messages
            return json.loads(json.dumps(next(iter(self.messages.values()))))

    def wait_message(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The one message, once ``predicate(message)`` holds."""

        def holds(fake: FakeDiscord) -> bool:
            return len(fake.messages) == 1 and predicate(next(iter(fake.messages.values())))

        assert self.wait_for(holds), self.messages
        return self.only_message()

    # ---------------------------------------------------------------- Discord's posts

    def sign(self, body: bytes, timestamp: str) -> str:
        """The ``X-Signature-Ed25519`` Discord sends with ``body``."""
        return self.private_key.sign(timestamp.encode("ascii") + body).hex()

    def post(
        self,
        url: str,
        interaction: dict[str, Any],
        *,
        timestamp: int | None = None,
        signature: str | None = None,
        body: bytes | None = None,
    ) -> requests.Response:
        """POST ``interaction`` to ``url`` signed as Discord signs it (or as given)."""
        raw = json.dumps(interaction).encode("utf-8") if body is None else body
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Discord-Interactions/1.0 (+https://discord.com)",
            "X-Signature-Timestamp": stamp,
            "X-Signature-Ed25519": self.sign(raw, stamp) if signature is None else signature,
        }
        return requests.post(url, data=raw, headers=headers, timeout=15)

    def __enter__(self) -> FakeDiscord:
        serve_in_thread(self.server)
        return self

    def __exit__(self, *exc: object) -> None:
        self.hold(False)
        self.server.shutdown()
        self.server.server_close()


_interaction_ids = itertools.count(1500000000000000001)


def _base(kind: int, user: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": str(next(_interaction_ids)),
        "application_id": APPLICATION,
        "type": kind,
        "token": "aW50ZXJhY3Rpb24gdG9rZW4",
        "version": 1,
        "app_permissions": "2048",
        "locale": "en-US",
    }
    if user is not None:
        body.update(
            guild_id=GUILD,
            channel_id=CHANNEL,
            guild_locale="en-US",
            member={
                "user": {"id": user, "username": f"user{user[-4:]}", "discriminator": "0"},
                "roles": [],
                "permissions": "2048",
                "joined_at": "2026-01-01T00:00:00.000000+00:00",
            },
        )
    return body


def ping() -> dict[str, Any]:
    """Discord checking the endpoint (type 1)."""
    return _base(1, None)


def click(user: str, message: dict[str, Any], custom_id: str) -> dict[str, Any]:
    """``user`` clicking the button ``custom_id`` on ``message`` (type 3, MESSAGE_COMPONENT)."""
    return {
        **_base(3, user),
        "message": message,
        "data": {"custom_id": custom_id, "component_type": 2},
    }


def button(message: dict[str, Any], label: str) -> str:
    """The ``custom_id`` of the button labelled ``label`` (a prefix) on ``message``."""
    for row in message["components"]:
        for one in row["components"]:
            if one["type"] == 2 and one["label"].startswith(label):
                return str(one["custom_id"])
    raise AssertionError(f"no {label!r} button on {message['components']}")


def submit(
    user: str, modal: dict[str, Any], values: dict[str, str], message: dict[str, Any] | None
) -> dict[str, Any]:
    """``user`` submitting the modal (an interaction response of type 9) with ``values``."""
    data = modal["data"]
    rows = [
        {
            "type": 1,
            "components": [
                {
                    "type": 4,
                    "custom_id": one["custom_id"],
                    "value": values.get(one["custom_id"], ""),
                }
                for one in row["components"]
            ],
        }
        for row in data["components"]
    ]
    body = {**_base(5, user), "data": {"custom_id": data["custom_id"], "components": rows}}
    if message is not None:
        body["message"] = message
    return body
