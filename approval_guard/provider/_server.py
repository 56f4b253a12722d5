"""The local provider's HTTP server: PROVIDER_API.md over stdlib ``http.server``.

:class:`ProviderServer` serves the API, the review page and its static files
from a :class:`~approval_guard.provider._store.Store`::

    server = ProviderServer("approvals.sqlite3", port=8080)
    if server.first_start_tokens is not None:      # only on a brand-new database
        print(server.first_start_tokens.instance, server.first_start_tokens.reviewer)
    print(server.url)
    server.serve_forever()                         # or .start() ... .stop(), or `with`

Choices the API leaves open, made here:

- Bodies over :data:`MAX_BODY_BYTES` (64 KiB) get ``413`` with error type
  ``invalid_request``; other bad input gets ``400 invalid_request``, never a
  500: bodies that are not UTF-8 or not a JSON object, ``NaN``/``Infinity``,
  an object with the same key twice (a reviewer could see one value and the
  tool get the other), arguments nested deeper than ``MAX_JSON_DEPTH`` (64)
  levels, strings with a lone surrogate, and a header we read
  (``Authorization``, ``Idempotency-Key``, ``Content-Length``,
  ``X-CSRF-Token``) sent twice.
- Numbers are kept exactly as sent: ``1e400``, ``-0``, ``1E5`` and a 400-digit
  integer are stored and echoed as that very text (see
  :class:`~approval_guard.provider._store.JSONNumber`).
- An unknown path is ``404 not_found``; a known path with the wrong method is
  ``405`` (type ``invalid_request``) with an ``Allow`` header.
- A reviewer credential may read any request but not create or cancel one
  (``403``); an instance credential may not list, decide or read history (``403``).
- ``GET /v1/requests`` answers ``{"requests": [...], "next_before": id|null}``,
  newest first; ``status`` filters (one status or several, comma-separated),
  ``limit`` (default and maximum 1000) sizes a page, and ``before=<id>`` asks
  for the page after that request; ``next_before`` is the value for the next
  page, null on the last. Each listed request also carries ``"display"``: the
  texts the review page shows (``tool``, ``arguments`` pretty-printed with
  exact numbers, ``note``, ``decided_by``, ``cancel_reason``; and, only when
  not empty, ``redacted``, ``editable`` and ``changes``: see
  :func:`listed_request_json`), with bidi and invisible characters escaped by
  :func:`approval_guard._display.escape`.
- ``GET /v1/requests/{id}/history`` (reviewer) answers ``{"request", "owner",
  "poll_count", "last_polled_at", "events": [{"seq", "at", "type", "actor",
  "detail"}]}``; actors are ``{"id", "name", "kind"}``, never a token.
- ``GET /v1/events?after=N&wait=25s`` (reviewer) answers ``{"seq": M}`` as soon
  as the change sequence ``M`` (creates, decisions, cancels, expiries) exceeds
  ``N``, or when the wait ends; without ``after`` it answers at once.
- ``valid_for`` of a decision is 1s to 24h, like ``timeout``; ``note`` is at
  most 10,000 characters.
- A ``409 not_pending`` from the decision endpoint carries the request under
  ``"request"`` too, as the cancel endpoint's does; so does a ``422
  idempotency_key_reused`` (API 1.1), with the request first created with the
  key (keys belong to one credential, so only its creator ever sees it).
- Two requests with the same ``Idempotency-Key`` at once: the second gets
  ``409 idempotency_key_in_use`` until the first has been answered.
- Editable arguments (API 1.1). A create body may carry ``"editable": [str]``:
  at most 100 distinct top-level argument names, none of whose values holds a
  redaction marker (else ``400``). It is a set: hashed for the idempotency
  comparison sorted (``[]`` and null count as leaving it out), echoed sorted as
  the request's ``"editable"``, and only when it lists any. A decision may
  carry ``"arguments"``, the whole object with the edits applied; ``400
  invalid_request`` when it is not an object, comes with a denial or on a
  request without editable names, adds, removes or changes a name not listed
  (compared as exact JSON text, so ``1`` to ``true`` or ``4900`` to ``4900.0``
  is a change), or puts a marker into a value; a ``"tool"`` in a decision is
  refused too. The request's ``arguments`` stay as created; arguments that
  differ are kept exactly and echoed as ``decision.arguments`` (equal ones are
  no edit and echo nothing); the history's ``decided`` event lists each
  changed name's ``before`` and ``after``. Type changes are kept: judging them
  is the adapter's job.
- The review page decides through its own ``POST /review/requests/{id}/decision``
  (session cookie and CSRF header, or a reviewer bearer): the API's decision
  fields plus ``"edits": {name: json_text}``, each text parsed here exactly
  (a browser would round ``9007199254740993``); text that is not JSON is a
  ``400`` saying so. A redaction marker, ``{"$redacted": "<12 hex>"}``, shows
  in ``display`` as ``\u2039redacted 1a2b3c4d5e6f\u203a`` and is never editable.

Long polls hold one thread each and wait on per-request events, so a decision
or cancel answers every waiting poll at once; ``TCP_NODELAY`` on every socket
keeps that within a millisecond or two (delayed ACKs would add ~40 ms).
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import logging
import math
import os
import re
import socket
import struct
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs

from approval_guard._display import (
    escape,
    escape_lines,
    is_hidden,
    redaction_digest,
    with_markers_shown,
)
from approval_guard._duration import check_duration_text, parse_duration_string
from approval_guard._wire import (
    APPROVED,
    DENIED,
    STATUSES,
    ApprovalRequest,
    error_body,
    format_http_date,
    format_timestamp,
    request_to_json,
)
from approval_guard.provider._store import (
    MAX_JSON_DEPTH,
    Annotation,
    AuditEvent,
    Clock,
    Credential,
    FirstStartTokens,
    History,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidEdit,
    InvalidJSON,
    NotPendingError,
    Session,
    Store,
    StoreClosedError,
    StoredRequest,
    UnknownRequest,
    changed_names,
    dump_json,
    load_json,
    with_edits,
)

logger = logging.getLogger("approval_guard.provider")

#: Request bodies larger than this are refused with 413.
MAX_BODY_BYTES = 64 * 1024
#: The local provider's cap on ``wait`` (seconds), as PROVIDER_API.md says.
DEFAULT_POLL_CAP = 60.0
#: Limits of the create body, from PROVIDER_API.md.
MAX_TOOL_CHARS = 200
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 24 * 3600
MAX_NOTE_CHARS = 10_000
MAX_LIST = 1000
DEFAULT_VALID_FOR_SECONDS = 300

SESSION_COOKIE = "ag_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_PLACEHOLDER = "{{CSRF_TOKEN}}"
STATIC_DIR = Path(__file__).parent / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HTML_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
)
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}
_STATIC_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,100}")
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")
_CONTENT_LENGTH = re.compile(r"[0-9]{1,18}")
_REQUEST_PATH = re.compile(r"/v1/requests/([^/]+)(?:/(cancel|decision|history))?")
_REVIEW_DECISION_PATH = re.compile(r"/review/requests/([^/]+)/decision")
#: A redaction marker's digest, as a guard writes it (12 lowercase hex digits).
_TOKEN_IN_TEXT = re.compile(r"(token=)[^&\s\"]*", re.IGNORECASE)

# --------------------------------------------------------------------------- faults

FAULT_KINDS = ("drop_after_commit", "reset_before", "status", "garbage", "delay", "headers")
#: What a fault can be aimed at; ``"any"`` matches every ``/v1`` exchange.
EXCHANGES = ("create", "poll", "cancel", "decision", "list", "history", "events", "any")
_STATUS_ERROR_TYPES = {
    429: "rate_limited",
    500: "internal_error",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


@attrs.frozen
class Fault:
    """One queued fault (see :meth:`Faults.add`)."""

    kind: str
    on: str
    status: int
    retry_after: float | str | None
    delay: float
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class FaultRecord:
    """A fault that was injected: what it was and which exchange it hit."""

    kind: str
    exchange: str
    path: str
    status: int | None
    at: float  # time.monotonic() when injected


class Faults:
    """Deterministic fault injection, for tests of code that talks to the provider.

    Faults are matched in the order they were added (first match wins) and each
    is used ``times`` times, then dropped::

        provider.faults.add("drop_after_commit", on="create")
        provider.faults.add("status", on="poll", status=429, retry_after=1, times=2)
        provider.faults.add("delay", on="poll", delay=3.0)

    Kinds:

    ``"drop_after_commit"``
        process the request fully (a create is committed), then close the
        connection without answering.
    ``"reset_before"``
        close the connection before processing anything.
    ``"status"``
        answer ``status`` (429 or 5xx) with an error body, and ``Retry-After``
        if ``retry_after`` is given, without processing anything.
    ``"garbage"``
        process the request (a create is committed), then answer 200 with a
        body that is not JSON.
    ``"delay"``
        sleep ``delay`` seconds, then process and answer normally (for a
        create, the ``Idempotency-Key`` is held while it sleeps).
    ``"headers"``
        process and answer normally, with ``headers`` added to the answer
        (a ``Date`` given there replaces the provider's own): hostile or stale
        ``Date`` and ``Retry-After`` values, for instance.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[list[Any]] = []  # [Fault, remaining uses]
        self._log: list[FaultRecord] = []

    def add(
        self,
        kind: str,
        *,
        on: str = "any",
        times: int = 1,
        status: int = 503,
        retry_after: float | str | None = None,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue a fault for the next ``times`` exchanges of kind ``on``."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, not {kind!r}")
        if on not in EXCHANGES:
            raise ValueError(f"'on' must be one of {EXCHANGES}, not {on!r}")
        if not isinstance(times, int) or times < 1:
            raise ValueError(f"times must be a positive integer, not {times!r}")
        if kind == "status" and status != 429 and not 500 <= status <= 599:
            raise ValueError(f"a status fault answers 429 or 5xx, not {status!r}")
        if delay < 0 or not math.isfinite(delay):
            raise ValueError(f"delay must be a non-negative number of seconds, not {delay!r}")
        pairs = tuple((headers or {}).items())
        if kind == "headers" and not pairs:
            raise ValueError("a headers fault needs headers={name: value, ...}")
        for name, value in pairs:
            if not (isinstance(name, str) and isinstance(value, str)) or any(
                ch in "\r\n" for ch in name + value
            ):
                raise ValueError(f"a fault header must be one line of text: {name!r}: {value!r}")
        fault = Fault(
            kind=kind, on=on, status=status, retry_after=retry_after, delay=delay, headers=pairs
        )
        with self._lock:
            self._queue.append([fault, times])

    def take(self, exchange: str, path: str = "") -> Fault | None:
        """Consume the first queued fault that matches ``exchange``, if any."""
        with self._lock:
            for entry in self._queue:
                fault: Fault = entry[0]
                if fault.on in ("any", exchange):
                    entry[1] -= 1
                    if entry[1] == 0:
                        self._queue.remove(entry)
                    self._log.append(
                        FaultRecord(
                            kind=fault.kind,
                            exchange=exchange,
                            path=path,
                            status=fault.status if fault.kind == "status" else None,
                            at=time.monotonic(),
                        )
                    )
                    logger.info("injecting fault %s into %s %s", fault.kind, exchange, path)
                    return fault
        return None

    @property
    def log(self) -> list[FaultRecord]:
        """Every fault injected so far, in order."""
        with self._lock:
            return list(self._log)

    @property
    def pending(self) -> int:
        """How many fault uses are still queued."""
        with self._lock:
            return sum(entry[1] for entry in self._queue)

    def clear(self) -> None:
        """Drop every queued fault and the log."""
        with self._lock:
            self._queue.clear()
            self._log.clear()


class Stats:
    """Counts of exchanges received, for assertions like "exactly one create was sent".

    Attributes: ``creates``, ``polls``, ``cancels``, ``decisions``, ``lists``
    (requests received, faulted ones included), ``created`` (new requests
    made), ``replays`` (creates answered from an idempotency key).
    """

    _NAMES = ("creates", "polls", "cancels", "decisions", "lists", "created", "replays")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def incr(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def __getattr__(self, name: str) -> int:
        if name in Stats._NAMES:
            with self._lock:
                return self._counts[name]
        raise AttributeError(name)

    def snapshot(self) -> dict[str, int]:
        """All counters as a dict."""
        with self._lock:
            return {name: self._counts[name] for name in Stats._NAMES}

    def reset(self) -> None:
        """Set every counter to zero."""
        with self._lock:
            self._counts.clear()

    def __repr__(self) -> str:
        return f"Stats({self.snapshot()})"


_EXCHANGE_STAT = {
    "create": "creates",
    "poll": "polls",
    "cancel": "cancels",
    "decision": "decisions",
    "list": "lists",
}

# --------------------------------------------------------------------------- HTTP


class _HTTPError(Exception):
    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: Sequence[tuple[str, str]] = (),
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.extra = extra or {}
        self.headers = headers
        self.close = close


class _Dropped(Exception):
    """The connection was closed on purpose (fault injection or shutdown)."""


def _bad(message: str) -> _HTTPError:
    return _HTTPError(400, "invalid_request", message)


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _redact(text: str) -> str:
    return _TOKEN_IN_TEXT.sub(r"\1<redacted>", text)


def _split_target(target: str) -> tuple[str, str] | None:
    """``(path, query)`` of a request target, or None for one that is no URL.

    ``urlsplit`` raises for some targets a client may send (``http://[/v1``):
    such a request gets a 400, and a log line must not fail on it either.
    """
    try:
        parts = urlsplit(target)
    except ValueError:
        return None
    return parts.path, parts.query


def _path_of(target: str) -> str:
    """The path of a request target for a log line; ``"?"`` when it is no URL."""
    split = _split_target(target)
    return "?" if split is None else split[0]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], provider: ProviderServer) -> None:
        self.provider = provider
        self._conns: set[socket.socket] = set()
        self._resets: set[socket.socket] = set()
        self._active = 0
        self._cond = threading.Condition()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        # Without this, Nagle + the client's delayed ACK hold a small answer ~40 ms.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._cond:
            self._conns.add(request)
            self._active += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def shutdown_request(self, request: Any) -> None:
        with self._cond:
            self._conns.discard(request)
            reset = request in self._resets
            self._resets.discard(request)
        if reset:
            # SO_LINGER 0 is set: close() sends a RST, with no FIN before it.
            request.close()
        else:
            super().shutdown_request(request)

    def mark_reset(self, request: socket.socket) -> None:
        with self._cond:
            self._resets.add(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, StoreClosedError)):
            logger.debug("connection ended: %r", exc)
        else:
            logger.exception("unexpected error while serving a connection")

    def kill_connections(self) -> None:
        """Shut every open connection down, as a killed process would."""
        with self._cond:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._active == 0, timeout)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "approval-guard-provider"
    sys_version = ""
    # An idle keep-alive connection is let go after this long.
    timeout = 300
    server: _HTTPServer

    _request_id = ""
    #: Headers a ``"headers"`` fault adds to this exchange's answer.
    _fault_headers: tuple[tuple[str, str], ...] = ()

    # ------------------------------------------------------------- plumbing

    @property
    def provider(self) -> ProviderServer:
        return self.server.provider

    @property
    def store(self) -> Store:
        return self.provider.store

    def version_string(self) -> str:
        return self.server_version

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header shows the provider's clock, which tests may offset
        # (or a "headers" fault's own value).
        for name, value in self._fault_headers:
            if name.lower() == "date":
                return value
        return format_http_date(self.store.now())

    def log_message(self, format: str, *args: Any) -> None:
        # The review-page login carries the reviewer token in the query string.
        logger.debug("%s %s", self.address_string(), _redact(format % args))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = _path_of(self.path) if hasattr(self, "path") else ""
        logger.debug("%s %s -> %s", getattr(self, "command", ""), path, code)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The stdlib calls this for malformed request lines, oversized headers and
        # unsupported methods; answer those in the API's JSON error shape too.
        self.close_connection = True
        self._request_id = str(uuid.uuid4())
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            # A line it could not parse leaves "HTTP/0.9", and the stdlib would then
            # send a bare body without a status line. Nobody speaks 0.9 any more.
            self.request_version = "HTTP/1.0"
        kind = "not_found" if code == 404 else "invalid_request"
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        self._send_json(code, error_body(kind, message or phrase))

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.send_response(status)
        self.send_header("X-Request-ID", self._request_id or str(uuid.uuid4()))
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (*headers, *self._fault_headers):
            if name.lower() != "date":
                self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, obj: object, headers: Sequence[tuple[str, str]] = ()) -> None:
        # dump_json: the exact number texts the store kept go out unchanged.
        body = dump_json(obj).encode("utf-8")
        self._send(status, body, "application/json", headers)

    def _send_html(self, status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> None:
        self._send(status, body, "text/html; charset=utf-8", (*_HTML_HEADERS, *headers))

    def _abort(self, *, reset: bool) -> None:
        """Close the connection without an answer (a RST if ``reset``, else a FIN)."""
        self.close_connection = True
        try:
            if reset:
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.server.mark_reset(self.connection)
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise _Dropped

    def _header(self, name: str, *, close: bool = False) -> str | None:
        """The value of a header sent at most once; sent twice, it is ambiguous: 400."""
        values = self.headers.get_all(name) or []
        if len(values) > 1:
            raise _HTTPError(
                400, "invalid_request", f"the {name} header was sent more than once", close=close
            )
        return values[0] if values else None

    def _read_body(self) -> bytes:
        if self.headers.get_all("Transfer-Encoding"):
            self.close_connection = True
            raise _HTTPError(
                400,
                "invalid_request",
                "chunked bodies are not supported; send Content-Length",
                close=True,
            )
        raw = self._header("Content-Length", close=True)
        if raw is None:
            return b""
        if not _CONTENT_LENGTH.fullmatch(raw.strip()):
            self.close_connection = True
            raise _HTTPError(400, "invalid_request", "bad Content-Length", close=True)
        length = int(raw)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._drain(length)
            raise _HTTPError(
                413,
                "invalid_request",
                f"the body is {length} bytes; the limit is {MAX_BODY_BYTES}",
                close=True,
            )
        return self.rfile.read(length)

    def _drain(self, length: int) -> None:
        # Read (and discard) a moderately oversized body so the client sees our
        # 413 rather than a reset; beyond 1 MiB we just close.
        remaining = min(length, 1024 * 1024)
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 65536))
            if not chunk:
                break
            remaining -= len(chunk)

    # ------------------------------------------------------------- dispatch

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        self._request_id = str(uuid.uuid4())
        self._fault_headers = ()
        try:
            if self.provider.stopping:
                self._abort(reset=False)
            body = self._read_body()
            split = _split_target(self.path)
            if split is None:
                raise _bad("the request target is not a URL")
            path, query_text = split
            query = parse_qs(query_text, keep_blank_values=True)
            self._route(method, path, query, body)
        except _HTTPError as err:
            if err.close:
                self.close_connection = True
            self._send_json(
                err.status, {**error_body(err.kind, err.message), **err.extra}, err.headers
            )
        except _Dropped:
            pass
        except (StoreClosedError, ConnectionError):
            # Stopping, or the client went away: nobody is left to answer.
            self.close_connection = True
        except Exception:
            logger.exception("internal error answering %s %s", method, _path_of(self.path))
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._send_json(500, error_body("internal_error", "internal error"))

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> None:
        if path == "/":
            self._only(method, "GET")
            self._page(query)
            return
        if path.startswith("/static/"):
            self._only(method, "GET")
            self._static(path[len("/static/") :])
            return
        if path == "/v1/requests":
            self._only(method, "GET", "POST")
            if method == "POST":
                self._create(body)
            else:
                self._list(query)
            return
        if path == "/v1/events":
            self._only(method, "GET")
            self._events(query)
            return
        review = _REVIEW_DECISION_PATH.fullmatch(path)
        if review is not None:
            self._only(method, "POST")
            self._review_decide(review.group(1), body)
            return
        match = _REQUEST_PATH.fullmatch(path)
        if match is None:
            raise _HTTPError(404, "not_found", f"no such endpoint: {path}")
        request_id, action = match.group(1), match.group(2)
        if action is None:
            self._only(method, "GET")
            self._poll(request_id, query)
        elif action == "cancel":
            self._only(method, "POST")
            self._cancel(request_id, body)
        elif action == "decision":
            self._only(method, "POST")
            self._decide(request_id, body)
        else:
            self._only(method, "GET")
            self._history(request_id)

    def _only(self, method: str, *allowed: str) -> None:
        if method not in allowed:
            raise _HTTPError(
                405,
                "invalid_request",
                f"{method} is not allowed here",
                headers=(("Allow", ", ".join(allowed)),),
            )

    # ------------------------------------------------------------- auth and faults

    def _session(self) -> tuple[str, Session] | None:
        raw = self.headers.get("Cookie")
        if not raw:
            return None
        try:
            cookie = SimpleCookie(raw)
        except CookieError:
            return None
        morsel = cookie.get(SESSION_COOKIE)
        if morsel is None:
            return None
        session = self.store.session(morsel.value)
        return None if session is None else (morsel.value, session)

    def _authenticate(self) -> Credential:
        header = self._header("Authorization")
        if header is not None:
            scheme, _, token = header.strip().partition(" ")
            credential = None
            if scheme.lower() == "bearer" and token.strip():
                credential = self.store.authenticate(token.strip())
            if credential is None:
                raise _HTTPError(401, "unauthorized", "missing or invalid bearer credential")
            return credential
        found = self._session()
        if found is not None:
            csrf = self._header(CSRF_HEADER) or ""
            if not hmac.compare_digest(csrf.encode(), found[1].csrf_token.encode()):
                # A cookie alone may come from a cross-site form; only our page can
                # read the token to put it in the header.
                raise _HTTPError(403, "forbidden", f"the {CSRF_HEADER} header is missing or wrong")
            return found[1].credential
        raise _HTTPError(401, "unauthorized", "missing or invalid bearer credential")

    def _require_reviewer(self, credential: Credential) -> None:
        if not credential.is_reviewer:
            raise _HTTPError(403, "forbidden", "this needs a reviewer credential")

    def _require_instance(self, credential: Credential) -> None:
        if credential.is_reviewer:
            raise _HTTPError(403, "forbidden", "this needs an instance credential")

    def _begin(self, exchange: str) -> tuple[Credential, Fault | None]:
        """Count the exchange, authenticate, and apply any up-front fault."""
        stat = _EXCHANGE_STAT.get(exchange)
        if stat is not None:
            self.provider.stats.incr(stat)
        credential = self._authenticate()
        fault = self.provider.faults.take(exchange, _path_of(self.path))
        if fault is not None:
            if fault.kind == "headers":
                self._fault_headers = fault.headers
            if fault.kind == "reset_before":
                self._abort(reset=True)
            if fault.kind == "status":
                headers: list[tuple[str, str]] = []
                if fault.retry_after is not None:
                    value = fault.retry_after
                    headers.append(
                        ("Retry-After", value if isinstance(value, str) else f"{value:g}")
                    )
                kind = _STATUS_ERROR_TYPES.get(fault.status, "unavailable")
                raise _HTTPError(
                    fault.status,
                    kind,
                    f"injected {fault.status} (fault injection)",
                    headers=headers,
                )
        return credential, fault

    def _delay(self, fault: Fault | None) -> None:
        if fault is not None and fault.kind == "delay" and fault.delay > 0:
            # Sleep on the stop event so stopping the server is not held up.
            self.provider.stop_event.wait(fault.delay)
            if self.provider.stopping:
                self._abort(reset=False)

    def _finish(self, fault: Fault | None) -> None:
        """Apply a fault that acts after processing: drop the answer, or garble it."""
        if self.provider.stopping:
            self._abort(reset=False)
        if fault is None:
            return
        if fault.kind == "drop_after_commit":
            self._abort(reset=False)
        if fault.kind == "garbage":
            self._send(200, b"<html>this is not JSON", "application/json")
            raise _Dropped

    # ------------------------------------------------------------- parsing

    def _json_body(self, body: bytes, *, allow_empty: bool = False) -> dict[str, Any]:
        if not body.strip():
            if allow_empty:
                return {}
            raise _bad("the body must be a JSON object")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad("the body is not valid UTF-8") from None
        try:
            # One level more than the arguments may nest: the body holds them.
            value = load_json(text, max_depth=MAX_JSON_DEPTH + 1)
        except InvalidJSON as exc:
            raise _bad(f"the body is not JSON the provider can keep exactly: {exc}") from None
        if not isinstance(value, dict):
            raise _bad("the body must be a JSON object")
        return value

    @staticmethod
    def _no_unknown(obj: dict[str, Any], allowed: set[str]) -> None:
        unknown = sorted(set(obj) - allowed)
        if unknown:
            raise _bad(f"unknown field(s): {', '.join(unknown)}")

    @staticmethod
    def _duration(value: object, field: str, low: int, high: int) -> int:
        try:
            return check_duration_text(value, repr(field), low, high)
        except ValueError as exc:
            raise _bad(str(exc)) from None

    def _wait(self, query: dict[str, list[str]]) -> float:
        values = query.get("wait")
        if not values:
            return 0.0
        try:
            seconds = parse_duration_string(values[0])
        except ValueError as exc:
            raise _bad(f"'wait': {exc}") from None
        return float(min(seconds, self.provider.poll_cap))

    # ------------------------------------------------------------- API endpoints

    def _create(self, body: bytes) -> None:
        credential, fault = self._begin("create")
        self._require_instance(credential)
        key = self._header("Idempotency-Key")
        if key is None or not _IDEMPOTENCY_KEY.fullmatch(key):
            raise _bad(
                "the Idempotency-Key header is required: 1 to 255 printable ASCII characters"
            )
        obj = self._json_body(body)
        self._no_unknown(obj, {"tool", "arguments", "timeout", "editable"})
        tool = obj.get("tool")
        if not isinstance(tool, str) or not 1 <= len(tool) <= MAX_TOOL_CHARS:
            raise _bad(f"'tool' must be a string of 1 to {MAX_TOOL_CHARS} characters")
        arguments = obj.get("arguments")
        if not isinstance(arguments, dict):
            raise _bad("'arguments' must be a JSON object")
        timeout = self._duration(
            obj.get("timeout"), "timeout", MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS
        )
        editable = obj.get("editable")
        if editable is not None and not isinstance(editable, list):
            raise _bad("'editable' must be a list of argument names")
        try:
            with self.store.claim_key(credential.id, key):
                self._delay(fault)
                result = self.store.create_request(
                    owner=credential,
                    idempotency_key=key,
                    tool=tool,
                    arguments=arguments,
                    timeout_seconds=timeout,
                    editable=editable,
                )
        except IdempotencyKeyInUse as exc:
            raise _HTTPError(409, "idempotency_key_in_use", str(exc)) from None
        except IdempotencyKeyReused as exc:
            # Keys are per credential, so this is the request its own creator made.
            extra = None if exc.request is None else {"request": request_json(exc.request)}
            raise _HTTPError(422, "idempotency_key_reused", str(exc), extra=extra) from None
        except (InvalidJSON, InvalidEdit) as exc:
            raise _bad(str(exc)) from None
        self.provider.stats.incr("created" if result.created else "replays")
        # The key is released before a dropped answer, so the client's retry replays.
        self._finish(fault)
        self._send_json(201 if result.created else 200, request_json(result.request))

    def _poll(self, request_id: str, query: dict[str, list[str]]) -> None:
        credential, fault = self._begin("poll")
        wait = self._wait(query)
        self._delay(fault)
        request = self.store.poll(
            request_id,
            viewer=credential,
            wait=wait,
            should_stop=lambda: self.provider.stopping,
        )
        self._answer_request(request, fault)

    def _answer_request(self, request: ApprovalRequest | None, fault: Fault | None) -> None:
        """200 with the request, or 404 when there is none for this credential."""
        if request is None:
            raise _HTTPError(404, "not_found", "no such request")
        self._finish(fault)
        self._send_json(200, request_json(request))

    def _cancel(self, request_id: str, body: bytes) -> None:
        credential, fault = self._begin("cancel")
        self._require_instance(credential)
        obj = self._json_body(body, allow_empty=True)
        self._no_unknown(obj, {"reason"})
        reason = obj.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise _bad("'reason' must be a string")
        self._delay(fault)
        try:
            request = self.store.cancel(request_id, owner=credential, reason=reason)
        except NotPendingError as exc:
            raise self._not_pending(exc) from None
        self._answer_request(request, fault)

    def _decide(self, request_id: str, body: bytes) -> None:
        credential, fault = self._begin("decision")
        self._require_reviewer(credential)
        obj = self._json_body(body)
        status, note, valid_for = self._decision_fields(obj, {"arguments"})
        arguments = obj.get("arguments")
        if "arguments" in obj and not isinstance(arguments, dict):
            raise _bad("'arguments' must be the whole arguments object, edits applied")
        self._delay(fault)
        request = self._record_decision(request_id, credential, status, note, valid_for, arguments)
        self._answer_request(request, fault)

    def _decision_fields(self, obj: dict[str, Any], extra: set[str]) -> tuple[str, str | None, int]:
        """``(status, note, valid_for seconds)`` of a decision body; 400 for anything else."""
        if "tool" in obj:
            # API 1.1: the tool is what was asked for; a reviewer may only edit arguments.
            raise _bad("a decision cannot change the tool; 'tool' is not a decision field")
        self._no_unknown(obj, {"status", "note", "valid_for", *extra})
        status = obj.get("status")
        if status not in (APPROVED, DENIED):
            raise _bad("'status' must be 'approved' or 'denied'")
        note = obj.get("note")
        if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
            raise _bad(f"'note' must be null or a string of at most {MAX_NOTE_CHARS} characters")
        valid_for = DEFAULT_VALID_FOR_SECONDS
        if obj.get("valid_for") is not None:
            valid_for = self._duration(obj["valid_for"], "valid_for", 1, MAX_TIMEOUT_SECONDS)
        return str(status), note, valid_for

    def _record_decision(
        self,
        request_id: str,
        credential: Credential,
        status: str,
        note: str | None,
        valid_for: int,
        arguments: dict[str, Any] | None,
    ) -> StoredRequest | None:
        """Store a decision (the API's and the page's); the store checks any edits."""
        try:
            return self.store.decide(
                request_id,
                reviewer=credential,
                status=status,
                note=note,
                valid_for=valid_for,
                arguments=arguments,
            )
        except NotPendingError as exc:
            raise self._not_pending(exc) from None
        except (InvalidEdit, InvalidJSON) as exc:
            raise _bad(str(exc)) from None

    def _review_decide(self, request_id: str, body: bytes) -> None:
        """The review page's decision: edits come as JSON texts, parsed here, never in JS.

        ``{"status", "note", "valid_for", "edits": {name: json_text}}``: the page
        cannot parse numbers exactly, so it sends what the reviewer typed and
        the server builds the whole arguments object with :func:`with_edits`.
        """
        self.provider.stats.incr("decisions")
        credential = self._authenticate()
        self._require_reviewer(credential)
        obj = self._json_body(body)
        status, note, valid_for = self._decision_fields(obj, {"edits"})
        edits = obj.get("edits")
        if edits is not None and (
            not isinstance(edits, dict) or not all(isinstance(v, str) for v in edits.values())
        ):
            raise _bad("'edits' must map argument names to JSON texts")
        arguments = None
        if edits:
            if status != APPROVED:
                raise _bad("a denial cannot carry edits: only an approval can edit")
            request = self.store.get_request(request_id)
            if request is None:
                raise _HTTPError(404, "not_found", "no such request")
            try:
                arguments = with_edits(request, edits)
            except InvalidEdit as exc:
                raise _bad(str(exc)) from None
        request = self._record_decision(request_id, credential, status, note, valid_for, arguments)
        self._answer_request(request, None)

    @staticmethod
    def _not_pending(exc: NotPendingError) -> _HTTPError:
        return _HTTPError(
            409,
            "not_pending",
            f"the request is {exc.request.status}, not pending",
            extra={"request": request_json(exc.request)},
        )

    def _list(self, query: dict[str, list[str]]) -> None:
        credential, fault = self._begin("list")
        self._require_reviewer(credential)
        statuses = [one for value in query.get("status", []) for one in value.split(",")]
        for status in statuses:
            if status not in STATUSES:
                raise _bad(f"'status' must be one or more of {', '.join(STATUSES)}")
        limit = MAX_LIST
        if query.get("limit"):
            try:
                limit = int(query["limit"][0])
            except ValueError:
                raise _bad("'limit' must be an integer") from None
            if not 1 <= limit <= MAX_LIST:
                raise _bad(f"'limit' must be between 1 and {MAX_LIST}")
        before = _first(query, "before")
        self._delay(fault)
        try:
            # One more than asked for tells whether another page follows.
            requests = self.store.list_requests(status=statuses, limit=limit + 1, before=before)
        except UnknownRequest:
            raise _bad("'before' must be the id of a listed request") from None
        more = len(requests) > limit
        requests = requests[:limit]
        annotations = self.store.annotations([r.id for r in requests])
        self._finish(fault)
        self._send_json(
            200,
            {
                "requests": [listed_request_json(r, annotations.get(r.id)) for r in requests],
                "next_before": requests[-1].id if more else None,
            },
        )

    def _history(self, request_id: str) -> None:
        credential, fault = self._begin("history")
        self._require_reviewer(credential)
        self._delay(fault)
        history = self.store.history(request_id)
        if history is None:
            raise _HTTPError(404, "not_found", "no such request")
        self._finish(fault)
        self._send_json(200, history_to_json(history))

    def _events(self, query: dict[str, list[str]]) -> None:
        credential, fault = self._begin("events")
        self._require_reviewer(credential)
        wait = self._wait(query)
        after_raw = _first(query, "after")
        self._delay(fault)
        if after_raw is None:
            seq = self.store.seq
        else:
            try:
                after = int(after_raw)
            except ValueError:
                raise _bad("'after' must be an integer") from None
            seq = self.store.wait_for_change(
                after=after, timeout=wait, should_stop=lambda: self.provider.stopping
            )
        self._finish(fault)
        self._send_json(200, {"seq": seq})

    # ------------------------------------------------------------- review page

    def _page(self, query: dict[str, list[str]]) -> None:
        tokens = query.get("token")
        if tokens is not None:
            credential = self.store.authenticate(tokens[0].strip())
            if credential is None or not credential.is_reviewer:
                self._send_html(401, _read_static("login.html"))
                return
            session_id, _session = self.store.create_session(credential)
            cookie = (
                f"{SESSION_COOKIE}={session_id}; HttpOnly; SameSite=Strict; Path=/; "
                f"Max-Age={int(_session.expires_at.timestamp() - self.store.now().timestamp())}"
            )
            # Redirect so the token leaves the address bar and the history.
            self._send_html(
                303,
                b'<!doctype html><title>Signed in</title><a href="/">Continue</a>',
                (("Set-Cookie", cookie), ("Location", "/")),
            )
            return
        found = self._session()
        if found is None:
            self._send_html(200, _read_static("login.html"))
            return
        page = _read_static("review.html").replace(
            CSRF_PLACEHOLDER.encode(), found[1].csrf_token.encode()
        )
        self._send_html(200, page)

    def _static(self, name: str) -> None:
        if not _STATIC_NAME.fullmatch(name) or ".." in name:
            raise _HTTPError(404, "not_found", "no such file")
        path = STATIC_DIR / name
        if not path.is_file():
            raise _HTTPError(404, "not_found", "no such file")
        if name == "review.html":
            # Only GET / fills in the CSRF token; never serve the raw template.
            raise _HTTPError(404, "not_found", "no such file")
        content_type = _CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
        self._send(200, path.read_bytes(), content_type, _HTML_HEADERS)


def request_json(request: ApprovalRequest) -> dict[str, Any]:
    """The wire form of a request, with API 1.1's ``"editable"`` when it lists any names."""
    out = request_to_json(request)
    if isinstance(request, StoredRequest) and request.editable:
        out["editable"] = list(request.editable)
    return out


def display_json(value: object) -> str:
    """A JSON value as a reviewer reads it: pretty, exact, markers shown, hidden ones escaped."""
    return escape_lines(dump_json(with_markers_shown(value), indent=2))


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def input_json(value: object) -> str:
    """A value as the page's input holds it: exact JSON that parses back to this very value.

    Hidden characters are written as JSON escapes (a surrogate pair beyond the
    BMP, not :func:`escape`'s ``\\U`` form), so the reviewer sees them and an
    untouched input still parses to the value it was filled with. Outside
    strings the writer emits only ASCII, so every hidden character is in one.
    """
    lines = dump_json(value, indent=2).split("\n")
    return "\n".join(
        "".join(_json_escape(char) if is_hidden(char) else char for char in line) for line in lines
    )


def listed_request_json(
    request: ApprovalRequest, annotation: Annotation | None = None
) -> dict[str, Any]:
    """A request as ``GET /v1/requests`` lists it: the wire form plus ``"display"``.

    ``display`` holds every text a reviewer is shown, made here and only here
    so the page never renders a value itself: ``arguments`` pretty-printed by
    the writer that makes the echo (each number exactly as stored, a guard's
    redaction marker as ``\u2039redacted 1a2b3c4d5e6f\u203a``), and every
    string with hidden characters escaped (:func:`approval_guard._display.escape`).
    Present only when not empty: ``redacted`` (the paths of redacted values),
    ``editable`` (``[{"name", "text"}]``, ``text`` the exact JSON to prefill
    an input with, see :func:`input_json`) and, once approved with edits,
    ``changes`` (``[{"name", "before", "after"}]``).
    """
    note = request.decision.note if request.decision is not None else None
    decided_by = annotation.decided_by if annotation is not None else None
    reason = annotation.cancel_reason if annotation is not None else None
    redacted: list[str] = []
    shown = with_markers_shown(request.arguments, found=redacted)
    editable = request.editable if isinstance(request, StoredRequest) else ()
    edited = request.decision.arguments if request.decision is not None else None
    changes = []
    if edited is not None:
        for name in changed_names(request.arguments, edited):
            changes.append(
                {
                    "name": escape(name),
                    "before": display_json(request.arguments.get(name)),
                    "after": display_json(edited.get(name)),
                }
            )
    display: dict[str, Any] = {
        "tool": escape(request.tool),
        "arguments": escape_lines(dump_json(shown, indent=2)),
        "note": None if note is None else escape_lines(note),
        "decided_by": None if decided_by is None else escape(decided_by),
        "cancel_reason": None if reason is None else escape_lines(reason),
    }
    # Only when there is something to say: a plain request keeps the 1.0 display form.
    if redacted:
        display["redacted"] = [escape(path) for path in redacted]
    if editable:
        display["editable"] = [
            {"name": escape(name), "text": input_json(request.arguments[name])} for name in editable
        ]
    if changes:
        display["changes"] = changes
    return {**request_json(request), "display": display}


def _read_static(name: str) -> bytes:
    return (STATIC_DIR / name).read_bytes()


def _actor_json(credential: Credential | None) -> dict[str, str] | None:
    if credential is None:
        return None
    return {"id": credential.id, "name": credential.name, "kind": credential.kind}


def _event_json(event: AuditEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "at": format_timestamp(event.at),
        "type": event.type,
        "actor": _actor_json(event.actor),
        "detail": event.detail,
    }


def history_to_json(history: History) -> dict[str, Any]:
    """The wire form of a request's audit trail (``GET /v1/requests/{id}/history``)."""
    return {
        "request": request_json(history.request),
        "owner": _actor_json(history.owner),
        "poll_count": history.poll_count,
        "last_polled_at": (
            None if history.last_polled_at is None else format_timestamp(history.last_polled_at)
        ),
        "events": [_event_json(event) for event in history.events],
    }


# --------------------------------------------------------------------------- the server


class ProviderServer:
    """The local approval provider: PROVIDER_API.md, the review page and its backend.

    :param db: a SQLite file path (created if missing), ``":memory:"``, or an
        open :class:`Store` (which the server then uses but does not close).
    :param host: the address to bind; loopback by default.
    :param port: the port; 0 picks a free one (see :attr:`url`).
    :param clock: the provider's clock (aware UTC datetimes); ignored for a
        ``Store`` argument, which has its own.
    :param poll_cap: the most a long poll waits, in seconds (API: 60).
    :param instance_token: / :param reviewer_token: known credentials to create
        on a fresh database (containers, CI); on one that has credentials, each
        given token must already be one (else ``ValueError``).

    The database is opened and the socket bound when the object is made, so
    :attr:`url` and :attr:`first_start_tokens` are known before serving. On a
    database without credentials one instance and one reviewer credential are
    made; their plaintext tokens are in :attr:`first_start_tokens` (else None)
    and are stored only hashed.

    ``start()`` serves in background threads and returns ``self``;
    ``serve_forever()`` serves in the calling thread until :meth:`stop` (or
    Ctrl-C); ``stop()`` ends everything as a kill would (open connections are
    shut, waiting polls get no answer). A stopped server can be started again:
    it reopens its database file and binds the same port. ``close()`` stops
    for good. Leaving a ``with`` block calls ``close()``.
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | Store = "approvals.sqlite3",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock | None = None,
        poll_cap: float = DEFAULT_POLL_CAP,
        instance_token: str | None = None,
        reviewer_token: str | None = None,
    ) -> None:
        if poll_cap < 0 or not math.isfinite(poll_cap):
            raise ValueError(f"poll_cap must be a non-negative number of seconds, not {poll_cap!r}")
        self.poll_cap = float(poll_cap)
        self._clock = clock
        if isinstance(db, Store):
            self._store = db
            self._db_path: str | None = None
        else:
            self._db_path = os.fspath(db)
            self._store = Store(self._db_path, clock=clock)
        #: Plaintext tokens made on this start of a fresh database, else None.
        try:
            self.first_start_tokens: FirstStartTokens | None = (
                self._store.ensure_initial_credentials(
                    instance_token=instance_token, reviewer_token=reviewer_token
                )
            )
        except ValueError:
            if self._db_path is not None:
                self._store.close()
            raise
        #: Fault injection for tests; see :class:`Faults`.
        self.faults = Faults()
        #: Exchange counters for tests; see :class:`Stats`.
        self.stats = Stats()
        self._host = host
        self._port = port
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._expirer_thread: threading.Thread | None = None
        self._running = False
        try:
            self._bind()
        except BaseException:
            if self._db_path is not None:
                self._store.close()
            raise

    # ------------------------------------------------------------- properties

    @property
    def store(self) -> Store:
        """The store being served (a new object after a stop/start on a file)."""
        return self._store

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of this server (no trailing slash)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def stopping(self) -> bool:
        """True from the moment :meth:`stop` is called until the next start."""
        return self.stop_event.is_set()

    @property
    def running(self) -> bool:
        return self._running

    def __repr__(self) -> str:
        return f"ProviderServer(url={self.url!r}, db={self._db_path or self._store.path!r})"

    # ------------------------------------------------------------- lifecycle

    def _bind(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        server_class = type("_Server", (_HTTPServer,), {"address_family": family})
        self._httpd = server_class((self._host, self._port), self)
        self._port = self._httpd.server_address[1]
        logger.info("provider bound to %s", self.url)

    def _prepare(self) -> _HTTPServer:
        with self._lock:
            if self._running:
                raise RuntimeError("the provider is already running")
            if self._store.closed:
                if self._db_path is None:
                    raise RuntimeError("the store this server was given has been closed")
                self._store = Store(self._db_path, clock=self._clock)
            if self._httpd is None:
                self._bind()
            assert self._httpd is not None
            self.stop_event.clear()
            self._running = True
            self._expirer_thread = threading.Thread(
                target=self._expire_loop, name="approval-guard-expirer", daemon=True
            )
            self._expirer_thread.start()
            return self._httpd

    def start(self) -> ProviderServer:
        """Serve in a background thread; returns self."""
        httpd = self._prepare()
        self._serve_thread = threading.Thread(
            target=self._accept_loop, args=(httpd,), name="approval-guard-provider", daemon=True
        )
        self._serve_thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` or KeyboardInterrupt.

        If :meth:`start` already runs the server, wait for it to stop.
        """
        if self._serve_thread is not None:
            self._serve_thread.join()
            return
        httpd = self._prepare()
        self._serve_thread = threading.current_thread()
        try:
            self._accept_loop(httpd)
        finally:
            self.stop()

    def _accept_loop(self, httpd: _HTTPServer) -> None:
        # Our own loop rather than serve_forever(): stop() wakes the blocked
        # accept() by shutting the listening socket, with no polling interval.
        while not self.stop_event.is_set():
            try:
                request, address = httpd.get_request()
            except OSError:
                break
            if self.stop_event.is_set():
                request.close()
                break
            try:
                httpd.process_request(request, address)
            except Exception:
                httpd.handle_error(request, address)
                httpd.shutdown_request(request)

    def _expire_loop(self) -> None:
        # Expire requests at their deadlines even when nobody polls them, so the
        # review page's change feed hears about it. Sleeps until the next
        # deadline or the next change, whichever comes first.
        store = self._store
        while not self.stop_event.is_set():
            try:
                seq = store.seq
                upcoming = store.expire_due()
            except StoreClosedError:
                return
            except Exception:
                logger.exception("expiring overdue requests failed")
                upcoming = None
            timeout = 3600.0
            if upcoming is not None:
                timeout = max(0.0, (upcoming - store.now()).total_seconds()) + 0.001
            store.wait_for_change(after=seq, timeout=timeout, should_stop=self.stop_event.is_set)

    def stop(self) -> None:
        """Stop serving: close the listener and every connection, end waiting polls."""
        with self._lock:
            httpd = self._httpd
            self.stop_event.set()
            self._running = False
            self._httpd = None
            serve_thread, self._serve_thread = self._serve_thread, None
            expirer, self._expirer_thread = self._expirer_thread, None
        if httpd is not None:
            with contextlib.suppress(OSError):
                httpd.socket.shutdown(socket.SHUT_RDWR)
            httpd.socket.close()
        self._store.wake_all()
        if httpd is not None:
            httpd.kill_connections()
        current = threading.current_thread()
        if serve_thread is not None and serve_thread is not current:
            serve_thread.join(5)
        if expirer is not None and expirer is not current:
            expirer.join(5)
        if httpd is not None and not httpd.wait_idle(5):
            logger.warning("some connections were still being handled after stop()")
        if self._db_path is not None and self._db_path != ":memory:":
            # A restart reopens the file, as a new process would. An in-memory
            # database is all there is, so it stays open until close().
            self._store.close()
        logger.info("provider at %s stopped", self.url)

    def close(self) -> None:
        """Stop, and close the database this server opened (it cannot be started again)."""
        self.stop()
        if self._db_path is not None:
            self._store.close()

    def __enter__(self) -> ProviderServer:
        if not self._running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _run_from_args(argv: Sequence[str] | None = None) -> None:
    """A bare entry point for tests that need a killable provider process.

    Prints one JSON line ``{"url": ...}`` when it is serving; never prints tokens
    (the ``approval-guard`` CLI is the way to run a provider by hand).
    """
    parser = argparse.ArgumentParser(description=_run_from_args.__doc__)
    parser.add_argument("--db", default="approvals.sqlite3")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--poll-cap", type=float, default=DEFAULT_POLL_CAP)
    args = parser.parse_args(argv)
    server = ProviderServer(args.db, host=args.host, port=args.port, poll_cap=args.poll_cap)
    server.start()
    print(json.dumps({"url": server.url}), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()


__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_POLL_CAP",
    "EXCHANGES",
    "FAULT_KINDS",
    "MAX_BODY_BYTES",
    "Fault",
    "FaultRecord",
    "Faults",
    "ProviderServer",
    "Stats",
    "display_json",
    "history_to_json",
    "input_json",
    "listed_request_json",
    "redaction_digest",
    "request_json",
]
