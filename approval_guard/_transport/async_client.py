"""The async transport: performs a described exchange (``_transport/exchange.py``) with ``httpx``.

Async tools wait on the event loop itself: no thread per call. One
:class:`AsyncProviderClient` per :class:`~approval_guard.Guard` keeps one
``httpx.AsyncClient`` per event loop (a client's connections belong to the
loop that opened them), each pooling at most 64 idle keep-alive connections.
The hard deadline of each exchange is the async driver's (``asyncio.wait_for``
around :meth:`AsyncProviderClient.perform`), so a provider that drips its
answer cannot stretch a wait; a cancelled exchange closes its connection.

``close()`` and ``await aclose()`` release every socket: a client whose loop
has already closed (``asyncio.run`` returned) cannot be closed gracefully, so
its sockets, tracked as they are opened, are closed directly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import ssl
import threading
import urllib.parse
from typing import Any

import httpcore
import httpx

from approval_guard._codec.clock import Clock
from approval_guard._transport.answer import Answer, TransportError
from approval_guard._transport.async_pool import (
    CLOSE_WAIT,
    LIMITS,
    LoopClient,
    Shard,
    TrackingBackend,
    ssl_context,
)
from approval_guard._transport.async_wait import BatchedWaits, BatchSupport
from approval_guard._transport.exchange import (
    ACCEPT,
    USER_AGENT,
    BodyReader,
    ExchangeSpec,
    LongPoll,
    failed,
    interpret,
)
from approval_guard._transport.scrub import Scrubber
from approval_guard._transport.sync_client import ECHOED_FIELDS

__all__ = ["AsyncProviderClient"]

log = logging.getLogger("approval_guard")


class AsyncProviderClient:
    """The provider's exchanges for async tools, one attempt each, on the running loop."""

    def __init__(
        self,
        base_url: str,
        credential: str,
        *,
        clock: Clock,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``transport``: an httpx transport to use instead of the network (tests)."""
        self._base = base_url
        self._transport = transport
        self._authorization = f"Bearer {credential}"
        self._scrub = Scrubber(credential, keep=ECHOED_FIELDS)
        # As for the sync transport: plain http stays on this machine (or goes only where
        # the user said), so no environment proxy may carry the token in clear text.
        self._https = urllib.parse.urlsplit(base_url).scheme.lower() == "https"
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, LoopClient] = {}
        self._ssl_context: ssl.SSLContext | None = None
        # Whether the provider serves batched waits (API 1.2): until it says it does not.
        self._batching = BatchSupport()

    def __repr__(self) -> str:
        return f"AsyncProviderClient(base_url={self._base!r}, credential='***')"

    # -- one exchange ----------------------------------------------------------

    async def perform(self, spec: ExchangeSpec) -> Answer:
        """Perform one exchange: an Answer for any HTTP status, else TransportError.

        The caller keeps the hard deadline (``spec.timeout``); the body is refused
        past it too. Cancelling this coroutine closes the exchange's connection.
        """
        clients = self._clients_for(asyncio.get_running_loop())
        if isinstance(spec, LongPoll) and spec.wait > 0 and self._batching.ok:
            waits: BatchedWaits | None = clients.waits
            if waits is None:
                waits = clients.waits = BatchedWaits(
                    functools.partial(self._perform_on, clients),
                    clock=self._clock,
                    support=self._batching,
                )
            return await waits.poll(spec)
        return await self._perform_on(clients, spec)

    async def _perform_on(self, clients: LoopClient, spec: ExchangeSpec) -> Answer:
        shard = clients.take()
        try:
            return await self._perform(shard.client, spec)
        finally:
            clients.give_back(shard)

    async def _perform(self, client: httpx.AsyncClient, spec: ExchangeSpec) -> Answer:
        timeout = max(0.05, spec.timeout)
        headers = {**spec.headers, **ACCEPT}
        headers["Authorization"] = self._authorization
        sent = self._clock.monotonic()
        deadline = sent + timeout
        try:
            request = client.build_request(
                spec.method,
                self._base + spec.path,
                content=spec.body,
                headers=headers,
                timeout=httpx.Timeout(timeout, connect=min(5.0, timeout)),
            )
            response = await client.send(request, stream=True, follow_redirects=False)
        # `from None`: httpx's exceptions hold the request, Authorization included.
        except httpx.TimeoutException:
            raise failed(spec, timed_out=True) from None
        except Exception:
            raise failed(spec, timed_out=False) from None
        try:
            reader = BodyReader(response.headers, deadline, self._clock)
            # As sent: the shared reader undoes gzip itself, within the size limit.
            async for chunk in response.aiter_raw():
                reader.add(chunk)
            raw = reader.body()
        except TransportError:
            raise
        except httpx.TimeoutException:
            raise failed(spec, timed_out=True) from None
        except Exception:
            raise failed(spec, timed_out=False, stage="body") from None
        finally:
            await response.aclose()
        return interpret(
            spec,
            response.status_code,
            response.headers,
            raw,
            sent=sent,
            received=self._clock.monotonic(),
            scrub=self._scrub,
            clock=self._clock,
        )

    # -- one client per loop ---------------------------------------------------

    def _clients_for(self, loop: asyncio.AbstractEventLoop) -> LoopClient:
        entry = self._clients.get(loop)
        if entry is not None:
            return entry
        with self._lock:
            for gone in [other for other in self._clients if other.is_closed()]:
                self._clients.pop(gone).force_close()
            entry = self._clients.get(loop)
            if entry is None:
                entry = LoopClient(self._new_client)
                self._clients[loop] = entry
        return entry

    def _new_client(self) -> Shard:
        if self._transport is not None:
            return Shard(httpx.AsyncClient(transport=self._transport), None)
        backend = TrackingBackend()
        # One TLS context for every shard: making one loads the CA bundle (about 20 ms).
        transport = httpx.AsyncHTTPTransport(
            verify=self._tls(), limits=LIMITS, trust_env=self._https, retries=0
        )
        tracked: TrackingBackend | None = None
        if isinstance(getattr(transport, "_pool", None), httpcore.AsyncConnectionPool):
            # httpx does not take a network backend; its pool is rebuilt with one that
            # remembers sockets. Without it, a closed loop's sockets wait for the GC.
            transport._pool = httpcore.AsyncConnectionPool(
                ssl_context=self._tls(),
                max_connections=LIMITS.max_connections,
                max_keepalive_connections=LIMITS.max_keepalive_connections,
                keepalive_expiry=LIMITS.keepalive_expiry,
                http1=True,
                http2=False,
                retries=0,
                network_backend=backend,
            )
            tracked = backend
        client = httpx.AsyncClient(
            transport=transport,
            trust_env=self._https,
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT},
        )
        return Shard(client, tracked)

    def _tls(self) -> ssl.SSLContext:
        """The TLS context of every shard, made once (plain http never uses it)."""
        if self._ssl_context is None:
            self._ssl_context = ssl_context()
        return self._ssl_context

    # -- closing -----------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every loop's clients: this loop's gracefully; never blocks this loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entries, self._clients = self._clients, {}
        waits: list[asyncio.Future[Any]] = []
        for other, entry in entries.items():
            if other is loop:
                await entry.aclose()
            else:
                future = self._close_on(other, entry, loop)
                if future is not None:
                    waits.append(asyncio.wrap_future(future))
        if waits:
            await asyncio.wait(waits, timeout=CLOSE_WAIT)

    def close(self) -> None:
        """Release every socket: closed loops' directly, live loops' through their own loop.

        Called from a coroutine it never blocks its loop: that loop's and other
        running loops' clients are asked to close, not waited for.
        """
        with self._lock:
            entries, self._clients = self._clients, {}
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for loop, entry in entries.items():
            try:
                future = self._close_on(loop, entry, here)
                if future is not None and here is None:
                    with contextlib.suppress(Exception):
                        future.result(CLOSE_WAIT)
            except Exception:
                log.warning("closing the async HTTP client failed", exc_info=True)

    @staticmethod
    def _close_on(
        loop: asyncio.AbstractEventLoop, entry: LoopClient, here: asyncio.AbstractEventLoop | None
    ) -> concurrent.futures.Future[None] | None:
        """Close ``entry`` as its loop allows; a future when that loop does it in its thread."""
        if loop.is_closed():
            entry.force_close()
        elif loop is here:
            task = loop.create_task(entry.aclose())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        elif loop.is_running():
            return asyncio.run_coroutine_threadsafe(entry.aclose(), loop)
        elif here is None:
            loop.run_until_complete(entry.aclose())
        # else: an idle loop, and we are inside another: it closes them when it ends.
        return None
