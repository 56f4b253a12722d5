"""The provider's three HTTP calls, error mapping and the retry policy. Knows no decorators.

One :class:`ProviderClient` per :class:`~approval_guard.Guard`. Each exchange
is a single attempt: it returns an :class:`Answer` for any HTTP status, or
raises :class:`TransportError` when no usable answer came (reset, timeout,
garbage, oversized). Whether and when to try again is decided by
:class:`RetryPolicy` and carried out by the waiting loop in ``_wait.py``,
which owns every sleep so that sync and async share one implementation.

Sessions are pooled, not shared: a ``requests.Session`` is used by one
thread at a time (psf/requests#2766), and returned to the pool afterwards so
connections are reused across polls.
"""

from __future__ import annotations

import base64
import functools
import ipaddress
import json
import logging
import math
import queue
import re
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import attrs
import backoff
import requests
import requests.auth

from . import _threads
from ._clock import Clock, ClockSample
from ._wire import (
    MESSAGE_LIMIT,
    QUOTE_LIMIT,
    SECRET_WORDS,
    parse_error,
    parse_http_date,
    safe_text,
    scrub_text,
)

log = logging.getLogger("approval_guard")

#: Larger answers are refused, not parsed.
MAX_ANSWER_BYTES = 1024 * 1024
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
#: A longer ``Retry-After`` is read as this (a day): nothing waits that long anyway.
MAX_RETRY_AFTER = 86400.0
#: Body fields compared with what was sent, never quoted: kept exactly as they came.
_ECHOED_FIELDS = frozenset({"tool", "arguments"})
_POOL_SIZE = 64
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_USER_AGENT = "approval-guard/0.1"


class TransportError(Exception):
    """No usable answer: connection refused/reset, timeout, garbage or oversized body.

    The message is bounded and printable (it ends up in logs and in ``NotRun``
    sentences) and never quotes a header value.
    """

    def __init__(self, kind: str, message: str) -> None:
        message = safe_text(message, MESSAGE_LIMIT)
        super().__init__(message)
        self.kind = kind
        self.message = message


@attrs.frozen
class Answer:
    """One HTTP answer from the provider, decoded."""

    status: int
    body: Any
    provider_request_id: str | None
    sample: ClockSample
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> tuple[str, str]:
        """``(type, message)`` of an error answer (``("unknown", "")`` if the body has none)."""
        return parse_error(self.body) or ("unknown", "")

    def describe(self) -> str:
        kind, message = self.error
        text = f"HTTP {self.status} {kind}"
        return f"{text}: {message}" if message else text


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_base_url(base_url: str, *, allow_insecure_http: bool) -> str:
    """Validate the provider URL; http:// only to loopback unless explicitly allowed."""
    if not isinstance(base_url, str) or not base_url:
        raise ValueError("base_url must be the provider's URL, e.g. 'https://approvals.example.com'")
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL with a host, got {base_url!r}")
    if parts.username or parts.password:
        raise ValueError("base_url must not carry credentials; pass credential= instead")
    if parts.query or parts.fragment:
        raise ValueError(f"base_url must not have a query or fragment, got {base_url!r}")
    if parts.scheme == "http" and not is_loopback(parts.hostname) and not allow_insecure_http:
        raise ValueError(
            f"base_url {base_url!r} uses plain http to a non-loopback host; use https, "
            "or pass allow_insecure_http=True if you really mean it"
        )
    return base_url.rstrip("/")


def parse_retry_after(value: str | None, date: datetime | None, now: datetime) -> float | None:
    """``Retry-After`` as seconds, at most a day; None if absent or not RFC 9110's form.

    Only delay-seconds (ASCII digits: ``"²".isdigit()`` is true too) or an
    HTTP-date. Never raises.
    """
    if not isinstance(value, str) or not value:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():
        digits = value.lstrip("0") or "0"
        # Twelve digits are enough to tell that it is over a day; no huge number is read.
        return MAX_RETRY_AFTER if len(digits) > 12 else min(MAX_RETRY_AFTER, float(digits))
    moment = parse_http_date(value)
    if moment is None:
        return None
    # Measure against the provider's own Date when we have it: our clocks may disagree.
    reference = date or now
    return min(MAX_RETRY_AFTER, max(0.0, (moment - reference).total_seconds()))


@attrs.define
class RetryPolicy:
    """Capped exponential backoff with full jitter, honouring ``Retry-After``.

    Every pause lasts at least ``floor`` seconds: full jitter can draw 0, and a
    provider may answer ``Retry-After: 0`` forever; neither may make a storm.
    """

    base: float = 0.1
    cap: float = 5.0
    floor: float = 0.1

    def delays(self) -> Iterator[float]:
        """Successive jittered delays for one run of retries, none under ``floor``."""
        gen = backoff.expo(factor=self.base, max_value=self.cap)
        next(gen)  # backoff's generators are primed with one send(None)
        for value in gen:
            yield max(self.floor, backoff.full_jitter(value))

    def pause(self, delay: float, retry_after: float | None) -> float:
        """The pause before the next attempt: ``Retry-After`` when given, never under ``floor``."""
        chosen = delay if retry_after is None else retry_after
        if math.isnan(chosen):
            chosen = self.cap
        return max(self.floor, chosen)

    @staticmethod
    def retryable(answer: Answer, *, creating: bool) -> bool:
        if answer.status in RETRYABLE_STATUS:
            return True
        # The first create with this key is still being processed: ask again shortly.
        return creating and answer.status == 409 and answer.error[0] == "idempotency_key_in_use"


class _Bearer(requests.auth.AuthBase):
    """``Authorization: Bearer``, set as requests' auth so that no ``.netrc`` replaces it."""

    def __init__(self, credential: str) -> None:
        self._header = f"Bearer {credential}"

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = self._header
        return request

    def __repr__(self) -> str:
        return "_Bearer('***')"


class _Scrubber:
    """Takes the credential (and anything shaped like one) out of provider-supplied text.

    A provider or a gateway in front of it may echo the request's headers in
    an error message or anywhere else; what it sends is shown to a model and
    written to logs, so every string in it is scrubbed before anything reads it.
    """

    def __init__(self, credential: str) -> None:
        quote = urllib.parse.quote
        forms = {credential, quote(credential, safe=""), urllib.parse.quote_plus(credential)}
        raw = credential.encode()
        for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
            forms.add(encoded.decode())
            forms.add(encoded.decode().rstrip("="))
        # Longest first, so that no form is left half-replaced by a shorter one.
        self._forms = tuple(sorted((f for f in forms if f), key=len, reverse=True))

    def __repr__(self) -> str:
        return "_Scrubber('***')"

    def text(self, value: str) -> str:
        """``value`` without the credential in any of its forms, nor secret-shaped parts."""
        for form in self._forms:
            if form in value:
                value = value.replace(form, "***")
        return scrub_text(value)

    def body(self, raw: bytes, decoded: Any) -> Any:
        """``decoded`` (the JSON of ``raw``) with every string scrubbed; cheap when clean.

        Without escapes (``\\``) or UTF-16/32 (NUL bytes), each decoded string
        appears verbatim in ``raw``: if no credential form and no secret word is
        there, no string can need scrubbing, and the walk is skipped.
        """
        if b"\\" not in raw and b"\x00" not in raw:
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                pass
            else:
                lowered = text.lower()
                if not any(form in text for form in self._forms) and not any(
                    word in lowered for word in SECRET_WORDS
                ):
                    return decoded
        return self.json(decoded)

    def json(self, value: Any) -> Any:
        """Every string of a decoded body scrubbed, except the echoes that are compared."""
        kind = type(value)
        if kind is str:
            # JSON may escape a lone surrogate (\\ud800): no UTF-8 writer accepts one, and a
            # note or status that cannot be written would make the outcome raise downstream.
            return self.text(_LONE_SURROGATE.sub("\ufffd", value))
        if kind is dict:
            return {
                key: item if key in _ECHOED_FIELDS else self.json(item)
                for key, item in value.items()
            }
        if kind is list:
            return [self.json(item) for item in value]
        return value


class ProviderClient:
    """The HTTP calls of the provider API, one attempt each."""

    def __init__(self, base_url: str, credential: str, *, clock: Clock) -> None:
        self._base = base_url
        self._auth = _Bearer(credential)
        self._scrub = _Scrubber(credential)
        # Plain http is allowed only because it stays on this machine (or the user
        # said so for that host): an environment proxy must not carry it elsewhere.
        self._trust_env = urllib.parse.urlsplit(base_url).scheme.lower() != "http"
        self._clock = clock
        self._pool: queue.LifoQueue[requests.Session] = queue.LifoQueue(maxsize=_POOL_SIZE)

    def __repr__(self) -> str:
        return f"ProviderClient(base_url={self._base!r}, credential='***')"

    def close(self) -> None:
        """Close pooled sessions (and their connections)."""
        while True:
            try:
                self._pool.get_nowait().close()
            except queue.Empty:
                return

    @contextmanager
    def _session(self) -> Iterator[requests.Session]:
        try:
            session = self._pool.get_nowait()
        except queue.Empty:
            session = requests.Session()
            session.headers["User-Agent"] = _USER_AGENT
            # False for http://: no HTTP(S)_PROXY/ALL_PROXY (the Bearer token would
            # travel to the proxy in clear text), and no .netrc or CA bundle either.
            # For https://, an environment proxy only sees a CONNECT tunnel, and
            # REQUESTS_CA_BUNDLE is how corporate TLS setups are configured.
            session.trust_env = self._trust_env
        healthy = True
        try:
            yield session
        except BaseException:
            healthy = False
            raise
        finally:
            if healthy:
                try:
                    self._pool.put_nowait(session)
                except queue.Full:
                    session.close()
            else:
                session.close()

    def create(self, body: bytes, idempotency_key: str, *, timeout: float) -> Answer:
        """``POST /v1/requests`` with the same key and bytes on every attempt.

        Returns within ``timeout`` (plus a fraction of a second), however slowly
        the provider answers.
        """
        return self._bounded(
            functools.partial(
                self._exchange,
                "POST",
                "/v1/requests",
                body=body,
                headers={"Idempotency-Key": idempotency_key, "Content-Type": "application/json"},
                timeout=timeout,
            ),
            timeout,
        )

    def read(self, request_id: str, *, wait: int, timeout: float) -> Answer:
        """``GET /v1/requests/{id}?wait=Ns``: a long poll; ``timeout`` must outlast ``wait``.

        Runs in the calling thread: the waiting loop already runs polls in a
        helper thread and stops waiting for one at its deadline.
        """
        path = f"/v1/requests/{urllib.parse.quote(request_id, safe='')}?wait={max(0, wait)}s"
        return self._exchange("GET", path, body=None, headers={}, timeout=timeout)

    def cancel(self, request_id: str, *, reason: str, timeout: float) -> Answer:
        """``POST /v1/requests/{id}/cancel`` with a reason, within ``timeout``."""
        path = f"/v1/requests/{urllib.parse.quote(request_id, safe='')}/cancel"
        body = json.dumps({"reason": reason}).encode()
        return self._bounded(
            functools.partial(
                self._exchange,
                "POST",
                path,
                body=body,
                headers={"Content-Type": "application/json"},
                timeout=timeout,
            ),
            timeout,
        )

    def call(
        self,
        method: str,
        path: str,
        *,
        payload: Any = None,
        timeout: float,
        decode: Callable[[bytes], Any] = json.loads,
    ) -> Answer:
        """Any other call of the API (the CLI's reviewer calls): one attempt within ``timeout``.

        ``path`` includes its query string; ``payload`` is sent as JSON when given;
        ``decode`` reads the body (one that keeps numbers exactly, for showing them),
        raising ``ValueError`` for what it cannot read.
        """
        body = None if payload is None else json.dumps(payload).encode()
        headers = {} if body is None else {"Content-Type": "application/json"}
        return self._bounded(
            functools.partial(
                self._exchange,
                method,
                path,
                body=body,
                headers=headers,
                timeout=timeout,
                decode=decode,
            ),
            timeout,
        )

    def _bounded(self, exchange: Callable[[], Answer], timeout: float) -> Answer:
        """Run ``exchange`` in a helper thread and stop waiting for it after ``timeout``."""
        outcome = _threads.start(exchange, name="approval_guard-http")
        if not outcome.done.wait(max(0.0, timeout)):
            raise TransportError("timeout", "no complete answer in time")
        answer: Answer = outcome.result()
        return answer

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float,
        decode: Callable[[bytes], Any] = json.loads,
    ) -> Answer:
        headers = {**headers, "Accept": "application/json"}
        connect_timeout = min(5.0, max(0.05, timeout))
        read_timeout = max(0.05, timeout)
        sent = self._clock.monotonic()
        deadline = sent + max(0.05, timeout)
        with self._session() as session:
            try:
                response = session.request(
                    method,
                    self._base + path,
                    data=body,
                    headers=headers,
                    auth=self._auth,
                    timeout=(connect_timeout, read_timeout),
                    stream=True,
                    allow_redirects=False,
                    verify=True,
                )
            # `from None`: requests' exceptions hold the request, Authorization included.
            except requests.Timeout:
                raise TransportError("timeout", f"{method} {path}: no answer in time") from None
            except Exception as exc:  # requests' or not: whatever came, it is no answer
                kind = type(exc).__name__
                raise TransportError("connection", f"{method} {path}: {kind}") from None
            try:
                raw = _read_limited(response, deadline, self._clock)
            except TransportError:
                raise
            except Exception:
                raise TransportError("connection", f"{method} {path}: answer cut off") from None
            finally:
                response.close()
        received = self._clock.monotonic()
        try:
            return self._interpret(method, path, response, raw, sent, received, decode)
        except TransportError:
            raise
        except Exception as exc:
            # Nothing a provider sends may make a guarded call raise. The message
            # names no header value: one could hold an echoed secret.
            raise TransportError(
                "garbage",
                f"{method} {path}: HTTP {response.status_code} answer could not be read "
                f"({type(exc).__name__})",
            ) from None

    def _interpret(
        self,
        method: str,
        path: str,
        response: requests.Response,
        raw: bytes,
        sent: float,
        received: float,
        decode: Callable[[bytes], Any],
    ) -> Answer:
        """Headers and body of a complete answer, parsed strictly and scrubbed."""
        status = response.status_code
        date = parse_http_date(response.headers.get("Date"))
        sample = ClockSample(sent=sent, received=received, date=date)
        try:
            decoded = decode(raw) if raw else None
        except ValueError:
            decoded = None
            if 200 <= status < 300:
                raise TransportError(
                    "garbage", f"{method} {path}: HTTP {status} with a body that is not JSON"
                ) from None
        if 200 <= status < 300 and not isinstance(decoded, dict):
            raise TransportError("garbage", f"{method} {path}: the answer is not a JSON object")
        provider_request_id = response.headers.get("X-Request-ID")
        if provider_request_id is not None:
            provider_request_id = safe_text(self._scrub.text(provider_request_id), QUOTE_LIMIT)
        return Answer(
            status=status,
            body=self._scrub.body(raw, decoded),
            provider_request_id=provider_request_id,
            sample=sample,
            retry_after=parse_retry_after(
                response.headers.get("Retry-After"), date, self._clock.now()
            ),
        )


def _read_limited(response: requests.Response, deadline: float, clock: Clock) -> bytes:
    declared = (response.headers.get("Content-Length") or "").strip(" \t")
    # ASCII digits only ("²".isdigit() is true); a long one is too large unread.
    if (
        declared.isascii()
        and declared.isdigit()
        and (len(declared) > 12 or int(declared) > MAX_ANSWER_BYTES)
    ):
        raise TransportError("too_large", "the provider's answer declares over 1 MiB; refused")
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(chunk_size=8192):
        if clock.monotonic() > deadline:
            raise TransportError("timeout", "the provider's answer did not finish in time")
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise TransportError("too_large", "the provider's answer is over 1 MiB; refused")
        chunks.append(chunk)
    return b"".join(chunks)
