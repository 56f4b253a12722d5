"""One exchange with the provider, described, and its answer read: shared by both transports.

The rules never hold a transport. They describe each exchange as an
:class:`ExchangeSpec` (method, path, headers, body, hard deadline) and a
driver has it performed: by ``requests`` for sync tools (``_transport/sync_client.py``), by
``httpx`` for async ones (``_transport/async_client.py``). Whatever carried it, the answer
is read here, once: the body limit, strict JSON, scrubbing, the clock sample,
``Retry-After``, and what a failure is called.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from approval_guard._call.backoff import parse_retry_after
from approval_guard._codec.clock import Clock, ClockSample
from approval_guard._codec.exact_json import dump_json, load_answer
from approval_guard._codec.safe_text import safe_text
from approval_guard._codec.wire import QUOTE_LIMIT, parse_http_date
from approval_guard._transport.answer import MAX_ANSWER_BYTES, Answer, TransportError
from approval_guard._transport.scrub import Scrubber

__all__ = [
    "ACCEPT",
    "USER_AGENT",
    "BodyReader",
    "Create",
    "ExchangeSpec",
    "Headers",
    "LongPoll",
    "api_call",
    "cancel",
    "create",
    "failed",
    "interpret",
    "read",
    "wait_many",
]

USER_AGENT = "approval-guard/0.1"
#: Sent by both transports: JSON, and only the encodings the shared reader undoes.
ACCEPT = {"Accept": "application/json", "Accept-Encoding": "gzip, deflate"}
_JSON = {"Content-Type": "application/json"}


class Headers(Protocol):
    """A response's headers, looked up case-insensitively (requests' and httpx's both are)."""

    def get(self, key: str, /) -> str | None: ...


# Dict-backed (its subclasses too), as ClockSample is: one per exchange.
@attrs.frozen(slots=False)
class ExchangeSpec:
    """What to send, and how long the whole exchange may take (a hard deadline, seconds).

    ``path`` includes its query string. ``decode`` reads the body, raising
    ``ValueError`` for what it cannot read.
    """

    method: str
    path: str
    body: bytes | None
    headers: Mapping[str, str]
    timeout: float
    decode: Callable[[bytes], Any] = load_answer

    @property
    def what(self) -> str:
        """``METHOD path`` for messages (the path holds ids and waits, never a secret)."""
        return f"{self.method} {self.path}"


@attrs.frozen(slots=False)
class LongPoll(ExchangeSpec):
    """A long poll's exchange, naming its request and wait (a batched wait may carry it)."""

    request_id: str = ""
    wait: int = 0


@attrs.frozen(slots=False)
class Create(ExchangeSpec):
    """A create's exchange; ``by``: the latest moment (monotonic) it may still be sent.

    A transport may hold a create back while others are in flight (the async
    one does); the wait counts toward ``by``, and ``timeout`` starts once sent.
    """

    by: float = math.inf


def create(body: bytes, idempotency_key: str, *, timeout: float, by: float = math.inf) -> Create:
    """``POST /v1/requests`` with the same key and bytes on every attempt."""
    headers = {"Idempotency-Key": idempotency_key, **_JSON}
    return Create("POST", "/v1/requests", body, headers, timeout, by=by)


def read(request_id: str, *, wait: int, timeout: float) -> LongPoll:
    """``GET /v1/requests/{id}?wait=Ns``: a long poll; ``timeout`` must outlast ``wait``."""
    wait = max(0, wait)
    path = f"/v1/requests/{urllib.parse.quote(request_id, safe='')}?wait={wait}s"
    return LongPoll("GET", path, None, {}, timeout, request_id=request_id, wait=wait)


def wait_many(request_ids: list[str], *, wait: int, timeout: float) -> ExchangeSpec:
    """``POST /v1/requests/wait`` (API 1.2): one wait on many requests."""
    body = json.dumps({"ids": request_ids, "wait": f"{max(0, wait)}s"}).encode()
    return ExchangeSpec("POST", "/v1/requests/wait", body, _JSON, timeout)


def cancel(request_id: str, *, reason: str, timeout: float) -> ExchangeSpec:
    """``POST /v1/requests/{id}/cancel`` with a reason."""
    path = f"/v1/requests/{urllib.parse.quote(request_id, safe='')}/cancel"
    return ExchangeSpec("POST", path, json.dumps({"reason": reason}).encode(), _JSON, timeout)


def api_call(
    method: str,
    path: str,
    *,
    payload: Any = None,
    timeout: float,
    decode: Callable[[bytes], Any] = load_answer,
) -> ExchangeSpec:
    """Any other call of the API (the CLI's reviewer calls); ``payload`` is sent as JSON."""
    body = None if payload is None else dump_json(payload).encode()
    return ExchangeSpec(method, path, body, {} if body is None else _JSON, timeout, decode)


class BodyReader:
    """An answer's body as it arrives, refused when over 1 MiB or past its deadline.

    It is given the bytes as they came off the wire and undoes one layer of
    ``gzip`` or ``deflate`` itself, never producing more than the 1 MiB
    allowed (a few KiB of compressed zeros cannot become gigabytes); any other
    encoding, or more than one, is refused.
    """

    def __init__(self, headers: Headers, deadline: float, clock: Clock) -> None:
        declared = (headers.get("Content-Length") or "").strip(" \t")
        # ASCII digits only ("²".isdigit() is true); a long one is too large unread.
        if (
            declared.isascii()
            and declared.isdigit()
            and (len(declared) > 12 or int(declared) > MAX_ANSWER_BYTES)
        ):
            raise TransportError("too_large", "the provider's answer declares over 1 MiB; refused")
        encoding = (headers.get("Content-Encoding") or "").strip(" \t").lower()
        self._zlib: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)
        elif encoding not in ("", "identity"):
            raise TransportError("garbage", "the provider's answer has an encoding not asked for")
        self._deadline = deadline
        self._clock = clock
        self._chunks: list[bytes] = []
        self._size = 0

    def add(self, chunk: bytes) -> None:
        """Take the next bytes as sent (still encoded)."""
        if self._clock.monotonic() > self._deadline:
            raise TransportError("timeout", "the provider's answer did not finish in time")
        if self._zlib is None:
            self._keep(chunk)
            return
        try:
            while chunk:
                self._keep(self._zlib.decompress(chunk, MAX_ANSWER_BYTES - self._size + 1))
                chunk = self._zlib.unconsumed_tail
        except zlib.error:
            raise TransportError("garbage", "the provider's answer does not decompress") from None

    def _keep(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > MAX_ANSWER_BYTES:
            raise TransportError("too_large", "the provider's answer is over 1 MiB; refused")
        if data:
            self._chunks.append(data)

    def body(self) -> bytes:
        if self._zlib is not None:
            if not self._zlib.eof and self._size:
                raise TransportError("garbage", "the provider's answer is cut off")
            self._keep(self._zlib.flush())
        return b"".join(self._chunks)


def failed(spec: ExchangeSpec, *, timed_out: bool, stage: str = "send") -> TransportError:
    """What a transport's exception is called: it names the exchange, never the exception's text.

    (A transport's exception may hold the request, Authorization included.)
    ``stage``: ``"send"`` until an answer began, ``"body"`` while reading it.
    """
    if timed_out:
        return TransportError("timeout", f"{spec.what}: no answer in time")
    if stage == "body":
        return TransportError("connection", f"{spec.what}: answer cut off")
    return TransportError("connection", f"{spec.what}: no answer")


def interpret(
    spec: ExchangeSpec,
    status: int,
    headers: Headers,
    raw: bytes,
    *,
    sent: float,
    received: float,
    scrub: Scrubber,
    clock: Clock,
) -> Answer:
    """Headers and body of a complete answer, parsed strictly and scrubbed.

    Raises only :class:`TransportError`: nothing a provider sends may make a
    guarded call raise, and the message names no header value (one could
    hold an echoed secret).
    """
    if status < 200:
        # An interim answer (103 Early Hints) is not the answer: the real one is lost.
        raise TransportError("garbage", f"{spec.what}: an interim HTTP {status} came as the answer")
    try:
        date = parse_http_date(headers.get("Date"))
        sample = ClockSample(sent=sent, received=received, date=date)
        try:
            decoded = spec.decode(raw) if raw else None
        except ValueError:
            decoded = None
            if 200 <= status < 300:
                raise TransportError(
                    "garbage", f"{spec.what}: HTTP {status} with a body that is not JSON"
                ) from None
        if 200 <= status < 300 and not isinstance(decoded, dict):
            raise TransportError("garbage", f"{spec.what}: the answer is not a JSON object")
        provider_request_id = headers.get("X-Request-ID")
        if provider_request_id is not None:
            provider_request_id = safe_text(scrub.text(provider_request_id), QUOTE_LIMIT)
        return Answer(
            status=status,
            body=scrub.body(raw, decoded),
            provider_request_id=provider_request_id,
            sample=sample,
            retry_after=parse_retry_after(headers.get("Retry-After"), date, clock.now()),
        )
    except TransportError:
        raise
    except Exception as exc:
        raise TransportError(
            "garbage",
            f"{spec.what}: HTTP {status} answer could not be read ({type(exc).__name__})",
        ) from None
