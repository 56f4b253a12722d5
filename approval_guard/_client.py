"""The provider's HTTP exchanges, one attempt each. Knows no decorators.

One :class:`ProviderClient` per :class:`~approval_guard.Guard`. Each exchange
is a single attempt: it returns an :class:`~._answer.Answer` for any HTTP
status, or raises :class:`~._answer.TransportError` when no usable answer came
(reset, timeout, garbage, oversized). Whether and when to try again is decided
by :class:`~._backoff.RetryPolicy` (``_backoff.py``) and carried out by the
waiting loop in ``_wait.py``,
which owns every sleep so that sync and async share one implementation.

Sessions are pooled, not shared: a ``requests.Session`` is used by one
thread at a time (psf/requests#2766), and returned to the pool afterwards so
connections are reused across polls.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import queue
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import requests
import requests.auth

from . import _threads
from ._answer import MAX_ANSWER_BYTES, Answer, TransportError, read_limited
from ._backoff import MAX_RETRY_AFTER, RetryPolicy, parse_retry_after
from ._clock import Clock, ClockSample
from ._json import dump_json, load_answer
from ._scrub import Scrubber, safe_text
from ._wire import QUOTE_LIMIT, parse_http_date

log = logging.getLogger("approval_guard")

#: Body fields compared with what was sent, never quoted: kept exactly as they came.
_ECHOED_FIELDS = frozenset({"tool", "arguments"})
_POOL_SIZE = 64
_USER_AGENT = "approval-guard/0.1"


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
        raise ValueError(
            "base_url must be the provider's URL, e.g. 'https://approvals.example.com'"
        )
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


class _Bearer(requests.auth.AuthBase):
    """``Authorization: Bearer``, set as requests' auth so that no ``.netrc`` replaces it."""

    def __init__(self, credential: str) -> None:
        self._header = f"Bearer {credential}"

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = self._header
        return request

    def __repr__(self) -> str:
        return "_Bearer('***')"


class ProviderClient:
    """The HTTP calls of the provider API, one attempt each."""

    def __init__(self, base_url: str, credential: str, *, clock: Clock) -> None:
        self._base = base_url
        self._auth = _Bearer(credential)
        self._scrub = Scrubber(credential, keep=_ECHOED_FIELDS)
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

    def create(
        self, body: bytes, idempotency_key: str, *, timeout: float, bounded: bool = True
    ) -> Answer:
        """``POST /v1/requests`` with the same key and bytes on every attempt.

        Returns within ``timeout`` (plus a fraction of a second), however slowly
        the provider answers. ``bounded=False``: run in the calling thread, for a
        caller (the sync driver's helper thread) that keeps the deadline itself.
        """
        exchange = functools.partial(
            self._exchange,
            "POST",
            "/v1/requests",
            body=body,
            headers={"Idempotency-Key": idempotency_key, "Content-Type": "application/json"},
            timeout=timeout,
        )
        return self._bounded(exchange, timeout) if bounded else exchange()

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
        decode: Callable[[bytes], Any] = load_answer,
    ) -> Answer:
        """Any other call of the API (the CLI's reviewer calls): one attempt within ``timeout``.

        ``path`` includes its query string; ``payload`` is sent as JSON when given;
        ``decode`` reads the body (one that keeps numbers exactly, for showing them),
        raising ``ValueError`` for what it cannot read.
        """
        body = None if payload is None else dump_json(payload).encode()
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
        decode: Callable[[bytes], Any] = load_answer,
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
                raw = read_limited(response, deadline, self._clock)
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


__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_RETRY_AFTER",
    "Answer",
    "ProviderClient",
    "RetryPolicy",
    "TransportError",
    "check_base_url",
    "is_loopback",
    "parse_retry_after",
]
