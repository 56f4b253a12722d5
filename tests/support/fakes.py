"""Test doubles for unit tests: a manual clock and a scripted provider behind ``responses``.

The fake provider keeps the API's rules for create/read/cancel on a manual
clock, so the waiting loop can be exercised for hours of simulated time in
milliseconds. Everything that crosses real HTTP is tested against the real
local provider instead (``approval_guard.testing.LocalProvider``).
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import responses

import approval_guard as ag
from approval_guard._codec.duration import format_duration, parse_duration_string
from approval_guard._codec.now import utcnow
from approval_guard._codec.wire import format_http_date, format_timestamp

BASE = "https://approvals.example.com"
#: The credential of the Guards on the fake provider: tests check it never shows.
SECRET = "agi_secret_token_never_shown_123"
EPOCH = datetime(2026, 9, 16, 12, 0, 0, tzinfo=timezone.utc)


class ManualClock:
    """A clock that moves only when told to (or when something sleeps on it)."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self._mono = 1000.0
        self._start = start
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def now(self) -> datetime:
        with self._lock:
            return self._start + timedelta(seconds=self._mono - 1000.0)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._mono += seconds

    def sleep(self, seconds: float, abandon: threading.Event | None = None) -> bool:
        self.sleeps.append(seconds)
        if abandon is not None and abandon.is_set():
            return True
        self.advance(seconds)
        return False


class _Request:
    """What the fake's callbacks read of a request (as ``responses`` hands them one)."""

    def __init__(self, method: str, url: str, headers: Any, body: bytes) -> None:
        self.method, self.url, self.headers, self.body = method, url, headers, body


class FakeProvider:
    """A provider behind ``responses``: one request store, scripted decisions and faults.

    ``script`` maps a simulated second (since creation) to an action run when a
    poll's wait crosses it: ``("approve", valid_for_s, note)``, ``("deny", note)``,
    ``("cancel",)``. ``faults`` is a list consumed in order: each is None (answer
    normally) or a callable returning a ``responses`` answer tuple or raising.
    """

    def __init__(self, clock: ManualClock, *, offset: float = 0.0) -> None:
        self.clock = clock
        self.offset = offset  # provider clock = local clock + offset
        self.requests: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, tuple[str, bytes]] = {}
        self.script: dict[float, tuple[Any, ...]] = {}
        self.faults: list[Callable[[], Any] | None] = []
        self.calls: list[tuple[str, str, dict[str, str], bytes | None]] = []
        self.created_at_mono: dict[str, float] = {}
        self.send_date = True
        self.cancel_fault: Callable[[Any], Any] | None = None  # answers every cancel when set
        self.echo_requested_by = True  # as an API 1.1 provider does (False: a 1.0 one)

    # -- provider time ----------------------------------------------------------

    def pnow(self) -> datetime:
        return self.clock.now() + timedelta(seconds=self.offset)

    def headers(self) -> dict[str, str]:
        out = {"X-Request-ID": str(uuid.uuid4())}
        if self.send_date:
            out["Date"] = format_http_date(self.pnow())
        return out

    def decide(self, request_id: str, action: tuple[Any, ...]) -> None:
        req = self.requests[request_id]
        if req["status"] != "pending":
            return
        now = self.pnow()
        if action[0] == "approve":
            req["status"] = "approved"
            req["decision"] = {
                "status": "approved",
                "note": action[2] if len(action) > 2 else None,
                "decided_at": format_timestamp(now),
                "expires_at": format_timestamp(now + timedelta(seconds=action[1])),
            }
        elif action[0] == "deny":
            req["status"] = "denied"
            req["decision"] = {
                "status": "denied",
                "note": action[1],
                "decided_at": format_timestamp(now),
            }
        elif action[0] == "cancel":
            req["status"] = "cancelled"
            req["cancelled_at"] = format_timestamp(now)
        elif action[0] == "raw":
            req.update(action[1])

    def _expire(self, req: dict[str, Any]) -> None:
        deadline = datetime.fromisoformat(req["deadline_at"].replace("Z", "+00:00"))
        if req["status"] == "pending" and self.pnow() >= deadline:
            req["status"] = "expired"

    def _advance_script(self, request_id: str, until_elapsed: float) -> bool:
        """Run scripted actions due by ``until_elapsed``; True if one ran (wakes the poll)."""
        for at in sorted(self.script):
            if at <= until_elapsed:
                action = self.script.pop(at)
                elapsed_now = self.clock.monotonic() - self.created_at_mono[request_id]
                if at > elapsed_now:
                    self.clock.advance(at - elapsed_now)
                self.decide(request_id, action)
                return True
        return False

    # -- handlers --------------------------------------------------------------

    def _fault(self) -> Any:
        if self.faults:
            fault = self.faults.pop(0)
            if fault is not None:
                return fault()
        return None

    def on_create(self, request: Any) -> Any:
        body: bytes = request.body if isinstance(request.body, bytes) else request.body.encode()
        self.calls.append(("POST", request.url, dict(request.headers), body))
        faulted = self._fault()
        if faulted is not None:
            return faulted
        key = request.headers.get("Idempotency-Key")
        if not key:
            return 400, self.headers(), _err("invalid_request", "missing Idempotency-Key")
        if key in self.keys:
            request_id, first = self.keys[key]
            if first != body:
                return 422, self.headers(), _err("idempotency_key_reused", "different body")
            req = self.requests[request_id]
            self._expire(req)
            return 200, self.headers(), json.dumps(req)
        data = json.loads(body)
        timeout = parse_duration_string(data["timeout"])
        now = self.pnow()
        request_id = str(uuid.uuid4())
        req = {
            "id": request_id,
            "tool": data["tool"],
            "arguments": data["arguments"],
            "timeout": format_duration(timeout),
            "status": "pending",
            "created_at": format_timestamp(now),
            "deadline_at": format_timestamp(now + timedelta(seconds=timeout)),
        }
        if self.echo_requested_by and "requested_by" in data:
            req["requested_by"] = data["requested_by"]
        self.requests[request_id] = req
        self.keys[key] = (request_id, body)
        self.created_at_mono[request_id] = self.clock.monotonic()
        if 0 in self.script:
            self.decide(request_id, self.script.pop(0))
        return 201, self.headers(), json.dumps(req)

    def on_read(self, request: Any) -> Any:
        self.calls.append(("GET", request.url, dict(request.headers), None))
        self.clock.advance(0.002)  # a round trip takes some time
        faulted = self._fault()
        if faulted is not None:
            return faulted
        match = re.search(r"/v1/requests/([^/?]+)\?wait=(\d+)s", request.url)
        assert match, request.url
        request_id, wait = match.group(1), int(match.group(2))
        req = self.requests.get(request_id)
        if req is None:
            return 404, self.headers(), _err("not_found", "no such request")
        self._expire(req)
        if req["status"] == "pending":
            elapsed = self.clock.monotonic() - self.created_at_mono[request_id]
            deadline = datetime.fromisoformat(req["deadline_at"].replace("Z", "+00:00"))
            to_deadline = (deadline - self.pnow()).total_seconds()
            if not self._advance_script(request_id, elapsed + min(wait, to_deadline)):
                self.clock.advance(max(0.0, min(wait, to_deadline)))
            self._expire(req)
        return 200, self.headers(), json.dumps(req)

    def on_cancel(self, request: Any) -> Any:
        self.calls.append(("POST", request.url, dict(request.headers), request.body))
        if self.cancel_fault is not None:
            return self.cancel_fault(request)
        faulted = self._fault()
        if faulted is not None:
            return faulted
        request_id = request.url.rsplit("/", 2)[-2]
        req = self.requests.get(request_id)
        if req is None:
            return 404, self.headers(), _err("not_found", "no such request")
        self._expire(req)
        if req["status"] == "pending":
            req["status"] = "cancelled"
            req["cancelled_at"] = format_timestamp(self.pnow())
        elif req["status"] != "cancelled":
            body = json.loads(_err("not_pending", "not pending"))
            body["request"] = req
            return 409, self.headers(), json.dumps(body)
        return 200, self.headers(), json.dumps(req)

    def attach_async(self, guard: Any) -> None:
        """Route ``guard``'s async tools (httpx, not requests) to this fake provider too."""
        import httpx

        from approval_guard._transport.async_client import AsyncProviderClient

        routes: list[tuple[str, re.Pattern[str], Callable[[Any], Any]]] = [
            ("POST", re.compile(rf"{re.escape(BASE)}/v1/requests"), self.on_create),
            ("GET", re.compile(rf"{re.escape(BASE)}/v1/requests/[^/]+\?.*"), self.on_read),
            ("POST", re.compile(rf"{re.escape(BASE)}/v1/requests/[^/]+/cancel"), self.on_cancel),
        ]

        def handle(request: httpx.Request) -> httpx.Response:
            url = str(request.url)
            for method, pattern, callback in routes:
                if request.method == method and pattern.fullmatch(url):
                    shim = _Request(request.method, url, request.headers, request.content)
                    status, headers, body = callback(shim)
                    data = body.encode() if isinstance(body, str) else body
                    return httpx.Response(status, headers=headers, stream=httpx.ByteStream(data))
            missing = _err("not_found", "no such route").encode()
            return httpx.Response(404, stream=httpx.ByteStream(missing))

        client = AsyncProviderClient(
            BASE, guard._credential, clock=guard._clock, transport=httpx.MockTransport(handle)
        )
        guard._aclient, guard._aperform = client, client.perform

    def install(self, rsps: responses.RequestsMock) -> None:
        rsps.add_callback(responses.POST, f"{BASE}/v1/requests", callback=self.on_create)
        rsps.add_callback(
            responses.GET,
            re.compile(rf"{re.escape(BASE)}/v1/requests/[^/]+\?.*"),
            callback=self.on_read,
        )
        rsps.add_callback(
            responses.POST,
            re.compile(rf"{re.escape(BASE)}/v1/requests/[^/]+/cancel"),
            callback=self.on_cancel,
        )

    # -- views for assertions ----------------------------------------------------

    def count(self, method: str, fragment: str) -> int:
        return sum(1 for m, url, _, _ in self.calls if m == method and url.endswith(fragment))

    @property
    def creates(self) -> list[tuple[str, str, dict[str, str], bytes | None]]:
        return [c for c in self.calls if c[0] == "POST" and c[1].endswith("/v1/requests")]

    @property
    def cancels(self) -> list[tuple[str, str, dict[str, str], bytes | None]]:
        return [c for c in self.calls if c[0] == "POST" and c[1].endswith("/cancel")]

    @property
    def polls(self) -> list[tuple[str, str, dict[str, str], bytes | None]]:
        return [c for c in self.calls if c[0] == "GET"]


def _err(kind: str, message: str) -> str:
    return json.dumps({"error": {"type": kind, "message": message}})


def make_tool(guard: ag.Guard, ran: list[tuple[Any, ...]], **options: Any) -> Any:
    @guard.requires_approval(timeout=options.pop("timeout", "30m"), **options)
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        ran.append((payment_id, amount, currency))
        return {"refunded": amount}

    return issue_refund


def status_fault(code: int, kind: str = "unavailable", retry_after: str | None = None) -> Any:
    def fault() -> Any:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return code, headers, json.dumps({"error": {"type": kind, "message": "try later"}})

    return fault


def raise_fault(exc: Exception) -> Any:
    def fault() -> Any:
        raise exc

    return fault


def unit_guard_for(clock: ManualClock, **options: Any) -> ag.Guard:
    settings: dict[str, Any] = {"base_url": BASE, "credential": SECRET, "clock": clock}
    settings.update(options)
    return ag.Guard(**settings)


class ShiftedClock:
    """A provider's clock (``() -> aware UTC datetime``): the real time, moved on when told.

    For a test whose point is a deadline passing: ``clock.advance(2)`` is two
    seconds later for the provider at once, with no wall-clock wait.
    """

    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return utcnow() + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += timedelta(seconds=seconds)


class ShiftedSystemClock:
    """The guard's real clocks (``ag.SystemClock``), moved on when told: time passes at once.

    For a guard test whose point is time spent (a slow callback, a slow ``when``):
    ``clock.advance(1.5)`` is a second and a half gone, with no wall-clock wait.
    """

    def __init__(self) -> None:
        self._real = ag.SystemClock()
        self._offset = 0.0
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def monotonic(self) -> float:
        with self._lock:
            return self._real.monotonic() + self._offset

    def now(self) -> datetime:
        with self._lock:
            return self._real.now() + timedelta(seconds=self._offset)

    def sleep(self, seconds: float, abandon: threading.Event | None = None) -> bool:
        return self._real.sleep(seconds, abandon)

    async def sleep_async(self, seconds: float) -> None:
        await self._real.sleep_async(seconds)
