"""A hostile provider on 127.0.0.1 that answers each exchange as the test says.

Fixture ``hostile``: ``hostile(create=..., read=..., cancel=..., wait=...)`` starts one.
By default it does not serve batched waits (API 1.2): ``POST /v1/requests/wait`` is 404.
It echoes API 1.3's ``batch`` and ``context`` as sent, unless made with ``known=``: the
create fields it takes, refusing any other with 400 as a 1.2 provider does; with
``unique_ids=True`` each create makes a request of its own (``req-1``, ``req-2``, ...).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.wire import format_http_date, format_timestamp
from tests.support.serving import BurstServer, serve_in_thread

Route = Callable[[dict[str, Any], str], tuple[int, Any]]


class HostileProvider:
    """A provider on 127.0.0.1 that answers each exchange as the test says.

    ``create``/``read``/``cancel`` take the request object as created and the
    path, and return ``(status, body)``; ``body`` is JSON-encoded unless bytes.
    """

    def __init__(
        self,
        *,
        create: Route,
        read: Route,
        cancel: Route,
        wait: Route,
        known: frozenset[str] | None = None,
        unique_ids: bool = False,
    ) -> None:
        self.routes = {"create": create, "read": read, "cancel": cancel, "wait": wait}
        #: Each create's body, decoded, and its bytes, as sent.
        self.bodies: list[dict[str, Any]] = []
        self.raw_bodies: list[bytes] = []
        #: The body of each batched wait, as sent.
        self.waits: list[Any] = []
        self.request: dict[str, Any] = {}
        self.seen: list[str] = []
        #: The client's (address, port) of each exchange, in order: one per TCP connection.
        self.peers: list[tuple[str, int]] = []
        self.created = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def date_time_string(self, timestamp: float | None = None) -> str:
                return format_http_date(datetime.now(timezone.utc))

            def answer(self, kind: str) -> None:
                owner.seen.append(kind)
                owner.peers.append(self.client_address[:2])
                self.reply(*owner.routes[kind](owner.request, self.path))

            def reply(self, status: int, body: Any) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.answer("read")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path == "/v1/requests/wait":
                    owner.waits.append(json.loads(raw))
                    self.answer("wait")
                    return
                if self.path.endswith("/cancel"):
                    self.answer("cancel")
                    return
                body = json.loads(raw)
                owner.bodies.append(body)
                owner.raw_bodies.append(raw)
                unknown = sorted(set(body) - known) if known is not None else []
                if unknown:  # as a 1.2 provider's create (provider/http/api.py) answers
                    owner.seen.append("create")
                    message = f"unknown field(s): {', '.join(unknown)}"
                    self.reply(400, {"error": {"type": "invalid_request", "message": message}})
                    return
                now = datetime.now(timezone.utc)
                number = len(owner.bodies) if unique_ids else 1
                owner.request = {
                    "id": f"req-{number}",
                    "tool": body["tool"],
                    "arguments": body["arguments"],
                    "timeout": body["timeout"],
                    "status": "pending",
                    "created_at": format_timestamp(now),
                    "deadline_at": format_timestamp(now + timedelta(minutes=30)),
                }
                for field in ("batch", "context"):  # API 1.3's echoes
                    if field in body:
                        owner.request[field] = body[field]
                self.answer("create")
                owner.created.set()

        self.server = BurstServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def approved(request: dict[str, Any], **decision: Any) -> dict[str, Any]:
    now = datetime.now(timezone.utc)
    return {
        **request,
        "status": "approved",
        "decision": {
            "status": "approved",
            "note": None,
            "decided_at": format_timestamp(now),
            "expires_at": format_timestamp(now + timedelta(minutes=5)),
            **decision,
        },
    }


def hostile_guard(p: HostileProvider) -> ag.Guard:
    return ag.Guard(
        base_url=p.url,
        credential="cred-review-1",
        harness_limit="20s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
        # Its own record: a port the process reused must not find another test's request ids.
        ledger=ag.MemoryLedger(),
    )


@pytest.fixture
def hostile() -> Iterator[Callable[..., HostileProvider]]:
    made: list[HostileProvider] = []

    def make(
        *, known: frozenset[str] | None = None, unique_ids: bool = False, **routes: Route
    ) -> HostileProvider:
        defaults: dict[str, Route] = {
            "create": lambda r, _: (201, r),
            "read": lambda r, _: (200, r),
            "cancel": lambda r, _: (200, {**r, "status": "cancelled"}),
            "wait": lambda r, _: (404, {"error": {"type": "not_found", "message": "no"}}),
        }
        made.append(HostileProvider(known=known, unique_ids=unique_ids, **{**defaults, **routes}))
        return made[-1]

    yield make
    for p in made:
        p.close()


#: The create fields a 1.2 provider takes (provider/http/api.py); it refuses any other.
FIELDS_1_2 = frozenset({"tool", "arguments", "timeout", "editable", "requested_by"})


def short_refund(guard: ag.Guard, ran: list[Any]) -> Callable[..., Any]:
    @guard.requires_approval(timeout="10s")
    def issue_refund(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return "refunded"

    return issue_refund


def denied(request: dict[str, Any], note: str) -> dict[str, Any]:
    now = format_timestamp(datetime.now(timezone.utc))
    return {
        **request,
        "status": "denied",
        "decision": {"status": "denied", "note": note, "decided_at": now},
    }
