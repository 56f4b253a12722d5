"""The sync transport: performs a described exchange (``_transport/exchange.py``) with ``requests``.

One :class:`ProviderClient` per :class:`~approval_guard.Guard`, for sync tools
and the CLI (async tools use ``_transport/async_client.py``). Each exchange is a single
attempt: it returns an :class:`~._answer.Answer` for any HTTP status, or
raises :class:`~._answer.TransportError` when no usable answer came (reset,
timeout, garbage, oversized); the answer is read by the shared
:func:`~._exchange.interpret`. Whether and when to try again is decided by
:class:`~._backoff.RetryPolicy` and carried out by the rules (``_call/retry.py``).

Sessions are pooled, not shared: a ``requests.Session`` is used by one
thread at a time (psf/requests#2766), and returned to the pool afterwards so
connections are reused across polls.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import queue
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import requests
import requests.auth

from approval_guard._call.backoff import MAX_RETRY_AFTER, RetryPolicy, parse_retry_after
from approval_guard._codec.clock import Clock
from approval_guard._codec.exact_json import load_answer
from approval_guard._codec.hosts import is_loopback
from approval_guard._transport import threads as _threads
from approval_guard._transport import watchdog as _watchdog
from approval_guard._transport.answer import MAX_ANSWER_BYTES, Answer, TransportError
from approval_guard._transport.exchange import (
    ACCEPT,
    USER_AGENT,
    BodyReader,
    ExchangeSpec,
    api_call,
    failed,
    interpret,
)
from approval_guard._transport.scrub import Scrubber

log = logging.getLogger("approval_guard")

#: Body fields compared with what was sent, never quoted: kept exactly as they came.
ECHOED_FIELDS = frozenset({"tool", "arguments", "requested_by", "batch", "context"})
_POOL_SIZE = 64


def is_ip_address(host: str) -> bool:
    """True for an IP address (``127.0.0.1``, ``[::1]``): reaching it needs no DNS lookup."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


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
        self._scrub = Scrubber(credential, keep=ECHOED_FIELDS)
        # Plain http is allowed only because it stays on this machine (or the user
        # said so for that host): an environment proxy must not carry it elsewhere.
        parts = urllib.parse.urlsplit(base_url)
        self._trust_env = parts.scheme.lower() != "http"
        # A DNS lookup cannot be cut short: only a provider named by its address is
        # reached on the calling thread (see perform_here).
        self._watchable = is_ip_address(parts.hostname or "")
        self._clock = clock
        self._pool: queue.LifoQueue[requests.Session] = queue.LifoQueue(maxsize=_POOL_SIZE)
        self._pid = os.getpid()  # whose sessions the pool holds (see _session)

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
        if self._pid != os.getpid():
            # A forked child: the pooled sessions' sockets are the parent's too, and one
            # connection read by two processes hands each the other's answers. They are
            # left alone (closing them here would not close the parent's), never used.
            # (A pid, not an at-fork hook: C code such as uWSGI forks without the hooks.)
            self._pool = queue.LifoQueue(maxsize=_POOL_SIZE)
            self._pid = os.getpid()
        try:
            session = self._pool.get_nowait()
        except queue.Empty:
            session = requests.Session()
            session.headers["User-Agent"] = USER_AGENT
            # False for http://: no HTTP(S)_PROXY/ALL_PROXY (the Bearer token would
            # travel to the proxy in clear text), and no .netrc or CA bundle either.
            # For https://, an environment proxy only sees a CONNECT tunnel, and
            # REQUESTS_CA_BUNDLE is how corporate TLS setups are configured.
            session.trust_env = self._trust_env
            adapter = _watchdog.WatchedAdapter()
            session.mount("https://", adapter)
            session.mount("http://", adapter)
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

    def perform(self, spec: ExchangeSpec) -> Answer:
        """Perform one exchange in the calling thread: an Answer for any HTTP status.

        A blocking read cannot be interrupted and a provider that drips its answer
        never trips a per-read timeout, so ``spec.timeout`` is kept by the caller
        (the sync driver runs this in a helper thread it stops waiting for);
        the body is still refused once its deadline passes.
        """
        headers = {**spec.headers, **ACCEPT}
        timeout = spec.timeout
        connect_timeout = min(5.0, max(0.05, timeout))
        read_timeout = max(0.05, timeout)
        sent = self._clock.monotonic()
        deadline = sent + max(0.05, timeout)
        with self._session() as session:
            try:
                response = session.request(
                    spec.method,
                    self._base + spec.path,
                    data=spec.body,
                    headers=headers,
                    auth=self._auth,
                    timeout=(connect_timeout, read_timeout),
                    stream=True,
                    allow_redirects=False,
                    verify=True,
                )
            # `from None`: requests' exceptions hold the request, Authorization included.
            except requests.Timeout:
                raise failed(spec, timed_out=True) from None
            except Exception:  # requests' or not: whatever came, it is no answer
                raise failed(spec, timed_out=False) from None
            try:
                if response.status_code < 200:
                    # An interim answer left as final: this connection is not trusted again.
                    raise TransportError(
                        "garbage",
                        f"{spec.what}: an interim HTTP {response.status_code} came as the answer",
                    )
                reader = BodyReader(response.headers, deadline, self._clock)
                # As sent: the shared reader undoes gzip itself, within the size limit.
                for chunk in response.raw.stream(8192, decode_content=False):
                    reader.add(chunk)
                raw = reader.body()
            except TransportError:
                raise
            except Exception:
                raise failed(spec, timed_out=False, stage="body") from None
            finally:
                response.close()
        received = self._clock.monotonic()
        return interpret(
            spec,
            response.status_code,
            response.headers,
            raw,
            sent=sent,
            received=received,
            scrub=self._scrub,
            clock=self._clock,
        )

    def here(self, spec: ExchangeSpec) -> Callable[[ExchangeSpec], Answer] | None:
        """How to perform ``spec`` on the calling thread within its deadline, or None.

        None when a DNS lookup or a proxy (whose connections are not watched)
        would be involved: the sync driver then runs the exchange in a helper
        thread that it stops waiting for at the deadline.
        """
        if not self._watchable:
            return None
        if self._trust_env and requests.utils.get_environ_proxies(self._base + spec.path):
            return None
        return self._perform_here

    def _perform_here(self, spec: ExchangeSpec) -> Answer:
        """:meth:`perform` on this thread; a watchdog shuts its socket at ``spec.timeout``."""
        with _watchdog.kept(max(0.05, spec.timeout)) as deadline:
            try:
                return self.perform(spec)
            except TransportError:
                if deadline.fired:
                    raise TransportError("timeout", f"{spec.what}: no answer in time") from None
                raise

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
        raising ``ValueError`` for what it cannot read. Returns within ``timeout``
        however slowly the provider answers (the exchange runs in a helper thread).
        """
        spec = api_call(method, path, payload=payload, timeout=timeout, decode=decode)
        outcome = _threads.start(functools.partial(self.perform, spec), name="approval_guard-http")
        if not outcome.done.wait(max(0.0, timeout)):
            raise TransportError("timeout", "no complete answer in time")
        answer: Answer = outcome.result()
        return answer


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
