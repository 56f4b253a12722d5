"""HTTP plumbing for the provider's routes: API errors, answers, bodies and query values.

Every answer carries a fresh ``X-Request-ID``, ``Cache-Control: no-store``,
``nosniff`` and a ``Date`` from the store's clock (which tests may offset).
Bodies are read here and only here: ``Content-Length`` is required for a body
(chunked bodies are refused), at most :data:`MAX_BODY_BYTES`, and must arrive
within :data:`SLOW_CLIENT_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from approval_guard._codec.duration import check_duration_text, parse_duration_string
from approval_guard._codec.exact_json import InvalidJSON, dump_json, load_json
from approval_guard._codec.wire import format_http_date
from approval_guard._codec.wire_models import error_body
from approval_guard.exceptions import ProviderError
from approval_guard.provider.http.limits import (
    CONTENT_LENGTH,
    HTML_HEADERS,
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    MAX_JSON_BODY_DEPTH,
    SLOW_CLIENT_SECONDS,
)
from approval_guard.provider.store.ids import new_id
from approval_guard.provider.store.protocol import StoreProtocol

Headers = Sequence[tuple[str, str]]


class ApiError(ProviderError):
    """An answer in the API's error shape: ``{"error": {"type", "message"}, **extra}``."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: Headers = (),
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.extra = extra or {}
        self.headers = headers
        self.close = close


def bad(message: str) -> ApiError:
    """A ``400 invalid_request``."""
    return ApiError(400, "invalid_request", message)


def not_found(message: str = "no such request") -> ApiError:
    return ApiError(404, "not_found", message)


def answer(
    store: StoreProtocol,
    status: int,
    body: bytes,
    content_type: str,
    headers: Headers = (),
    *,
    close: bool = False,
) -> Response:
    """An answer with the headers every answer carries, plus ``headers``."""
    response = Response(body, status_code=status, media_type=content_type)
    # Straight onto the raw list (names lowercased, as Starlette keeps them; the
    # route table cases them on the way out): each ``headers[...] =`` rescans it.
    raw = response.raw_headers
    raw.append((b"x-request-id", new_id().encode("latin-1")))
    raw.append((b"date", format_http_date(store.now()).encode("latin-1")))
    raw.append((b"cache-control", b"no-store"))
    raw.append((b"x-content-type-options", b"nosniff"))
    for name, value in headers:
        raw.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    if close:
        raw.append((b"connection", b"close"))
    return response


def json_answer(store: StoreProtocol, status: int, obj: object, headers: Headers = ()) -> Response:
    """A JSON answer; exact number texts the store kept go out unchanged."""
    return answer(store, status, dump_json(obj).encode("utf-8"), "application/json", headers)


def html_answer(store: StoreProtocol, status: int, body: bytes, headers: Headers = ()) -> Response:
    return answer(store, status, body, "text/html; charset=utf-8", (*HTML_HEADERS, *headers))


def to_root(request: Request) -> str:
    """The relative URL from this request's page to the provider's root: ``./``, ``../../``...

    A page writes the URLs the browser follows (its files, its forms) with it,
    so they work when a reverse proxy serves the provider under a path prefix
    (``https://host/approvals/*`` to ``/*``): the browser resolves them against
    the address it shows, prefix included. Counted on the raw path, so an
    encoded ``/`` inside an id adds no level.
    """
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else request.url.path
    depth = path.split("?", 1)[0].count("/") - 1
    return "../" * depth if depth > 0 else "./"


def error_answer(store: StoreProtocol, err: ApiError) -> Response:
    body = {**error_body(err.kind, err.message), **err.extra}
    return answer(
        store,
        err.status,
        dump_json(body).encode("utf-8"),
        "application/json",
        err.headers,
        close=err.close,
    )


def check_head(request: Request) -> None:
    """400 for a request head over :data:`MAX_HEAD_BYTES` (uvicorn bounds only a partial one)."""
    size = len(request.scope.get("raw_path") or b"") + len(request.scope.get("query_string", b""))
    size += sum(len(name) + len(value) + 4 for name, value in request.scope["headers"])
    if size > MAX_HEAD_BYTES:
        raise ApiError(
            400, "invalid_request", f"the request head is over {MAX_HEAD_BYTES} bytes", close=True
        )


def header(request: Request, name: str, *, close: bool = False) -> str | None:
    """The value of a header sent at most once; sent twice it is ambiguous: 400."""
    values = request.headers.getlist(name)
    if len(values) > 1:
        raise ApiError(
            400, "invalid_request", f"the {name} header was sent more than once", close=close
        )
    return values[0] if values else None


def check_body_length(request: Request) -> int:
    """The declared body length, before reading; a 4xx that closes the connection if refused.

    A body over the limit is refused at once (and, when read, drained first).
    """
    if request.headers.getlist("transfer-encoding"):
        raise ApiError(
            400,
            "invalid_request",
            "chunked bodies are not supported; send Content-Length",
            close=True,
        )
    raw = header(request, "content-length", close=True)
    if raw is None:
        return 0
    if not CONTENT_LENGTH.fullmatch(raw.strip()):
        raise ApiError(400, "invalid_request", "bad Content-Length", close=True)
    return int(raw)


async def read_body(request: Request) -> bytes:
    """The body, checked against the limits above (a 4xx that closes the connection if not)."""
    length = check_body_length(request)
    if length == 0:
        return b""
    if length > MAX_BODY_BYTES:
        # Read (and drop) a moderately oversized body so the client sees the 413
        # rather than a reset; beyond 1 MiB the connection is just closed after it.
        await _drain(request, min(length, 1024 * 1024))
        raise ApiError(
            413,
            "invalid_request",
            f"the body is {length} bytes; the limit is {MAX_BODY_BYTES}",
            close=True,
        )
    chunks: list[bytes] = []
    try:
        async with _within(_client_timeout(request)):
            async for chunk in request.stream():
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(
            408, "invalid_request", "the body did not arrive in time", close=True
        ) from None
    return b"".join(chunks)


if sys.version_info >= (3, 11):
    # Much cheaper than a cancel scope, and every body is read under one.
    _within = asyncio.timeout
else:  # pragma: no cover - Python 3.10

    @contextlib.asynccontextmanager
    async def _within(seconds: float) -> AsyncIterator[None]:
        with anyio.fail_after(seconds):
            yield


def _client_timeout(request: Request) -> float:
    ctx = getattr(request.app.state, "ctx", None)
    return float(getattr(ctx, "client_timeout", SLOW_CLIENT_SECONDS))


async def _drain(request: Request, limit: int) -> None:
    seen = 0
    # A second at most: a client that sends no more is answered anyway.
    with (
        anyio.move_on_after(min(1.0, _client_timeout(request))),
        contextlib.suppress(ClientDisconnect),
    ):
        async for chunk in request.stream():
            seen += len(chunk)
            if seen >= limit:
                return


def json_object(body: bytes, *, allow_empty: bool = False) -> dict[str, Any]:
    """A body that must be one JSON object the store can keep exactly; 400 otherwise."""
    if not body.strip():
        if allow_empty:
            return {}
        raise bad("the body must be a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("the body is not valid UTF-8") from None
    try:
        value = load_json(text, max_depth=MAX_JSON_BODY_DEPTH)
    except InvalidJSON as exc:
        raise bad(f"the body is not JSON the provider can keep exactly: {exc}") from None
    if not isinstance(value, dict):
        raise bad("the body must be a JSON object")
    return value


def no_unknown(obj: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise bad(f"unknown field(s): {', '.join(unknown)}")


def duration(value: object, field: str, low: int, high: int) -> int:
    """A duration field's whole seconds within ``[low, high]``; 400 otherwise."""
    try:
        return check_duration_text(value, repr(field), low, high)
    except ValueError as exc:
        raise bad(str(exc)) from None


def query_value(request: Request, name: str) -> str | None:
    """The first value of a query parameter, or None when absent."""
    values = request.query_params.getlist(name)
    return values[0] if values else None


def wait_seconds(request: Request, cap: float) -> float:
    """The ``wait`` query parameter in seconds, capped at ``cap``; 0 when absent."""
    value = query_value(request, "wait")
    if value is None:
        return 0.0
    try:
        seconds = parse_duration_string(value)
    except ValueError as exc:
        raise bad(f"'wait': {exc}") from None
    return float(min(seconds, cap))
