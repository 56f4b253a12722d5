"""The async transport's connections: httpx clients per event loop, sharded pools, sockets tracked.

One ``httpx.AsyncClient`` per event loop (a client's connections belong to the
loop that opened them), its pools sharded so that none holds more than a few
exchanges in flight, each pooling at most 64 idle keep-alive connections.
Sockets are tracked as they are opened, so a client whose loop has already
closed can still have them closed directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any

import httpcore
import httpx

log = logging.getLogger("approval_guard")

#: Idle keep-alive connections kept per event loop (the sync pool keeps 64 sessions).
KEEP_ALIVE = 64


#: No bound on connections in use: each waiting call holds its own long poll, and a
#: bound would make a waiting call queue behind others' polls for its first byte.
LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=KEEP_ALIVE)


#: Exchanges in flight on one connection pool at most (see :class:`LoopClient`).
SHARD = 8


#: How long ``close()`` waits for a client on a loop running in another thread.
CLOSE_WAIT = 2.0


class TrackingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend, remembering each socket it opens (to close it after its loop)."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()
        self.sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        # asyncio hands out a TransportSocket wrapper; the socket it wraps is what closes.
        sock = stream.get_extra_info("socket")
        sock = getattr(sock, "_sock", sock)
        if isinstance(sock, socket.socket):
            self.sockets.add(sock)
        return stream

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class Shard:
    """One ``httpx.AsyncClient`` (its own connection pool) and the sockets it opened."""

    def __init__(self, client: httpx.AsyncClient, backend: TrackingBackend | None) -> None:
        self.client = client
        self.backend = backend
        self.in_flight = 0

    def force_close(self) -> None:
        """Close the sockets directly: only once their loop is closed (nothing selects on them)."""
        if self.backend is None:
            return
        for sock in list(self.backend.sockets):
            with contextlib.suppress(OSError):
                sock.close()


class LoopClient:
    """One loop's clients: shards of at most :data:`SHARD` exchanges in flight each.

    httpcore's pool looks at every connection it holds on each request and
    each answer, so one pool holding 10,000 long polls does 10,000 steps per
    answer. The first shard stays (keeping up to 64 idle connections for the
    next calls); a further shard is closed as soon as nothing is in flight on it.

    The loop closes them itself when it ends: an async generator started here
    is finalised by ``loop.shutdown_asyncgens()`` (``asyncio.run`` calls it), and
    its ``finally`` closes every shard while the loop can still do it cleanly.
    """

    def __init__(self, make: Callable[[], Shard]) -> None:
        self._make = make
        self.shards: list[Shard] = [make()]
        #: Shards being closed (kept for force_close until their close has finished).
        self._retired: list[Shard] = []
        self._closing: set[asyncio.Task[None]] = set()
        self.closed = False
        #: This loop's batched waits (``async_wait.BatchedWaits``), made on the first long poll.
        self.waits: Any = None
        self._keeper: AsyncGenerator[None, None] = self._at_loop_end()
        step: Any = self._keeper.__anext__()  # registers it with the loop's asyncgen hooks
        with contextlib.suppress(StopIteration):
            step.send(None)

    async def _at_loop_end(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if not self.closed:
                await self.aclose()

    def take(self) -> Shard:
        for shard in self.shards:
            if shard.in_flight < SHARD:
                break
        else:
            shard = self._make()
            self.shards.append(shard)
        shard.in_flight += 1
        return shard

    def give_back(self, shard: Shard) -> None:
        shard.in_flight -= 1
        if shard.in_flight == 0 and shard is not self.shards[0] and shard in self.shards:
            self.shards.remove(shard)
            self._retired.append(shard)
            task = asyncio.ensure_future(shard.client.aclose())
            self._closing.add(task)

            def done(t: asyncio.Task[None]) -> None:
                self._closing.discard(t)
                if shard in self._retired:
                    self._retired.remove(shard)
                if not t.cancelled() and t.exception() is not None:
                    shard.force_close()

            task.add_done_callback(done)

    def _all(self) -> list[Shard]:
        return [*self.shards, *self._retired]

    def force_close(self) -> None:
        """Close every socket directly (the loop has closed): nothing selects on them any more."""
        self.closed = True
        self._stop_waits()
        for shard in self._all():
            shard.force_close()
        self._finish_keeper()

    def _stop_waits(self) -> None:
        if self.waits is not None:
            with contextlib.suppress(Exception):
                self.waits.close()

    async def aclose(self) -> None:
        self.closed = True
        self._stop_waits()
        for shard in self._all():
            try:
                await shard.client.aclose()
            except Exception:
                log.warning("closing the async HTTP client failed", exc_info=True)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        self._finish_keeper()

    def _finish_keeper(self) -> None:
        """End the loop-end generator now (``closed`` is set, so its finally awaits nothing)."""
        step: Any = self._keeper.aclose()
        with contextlib.suppress(StopIteration, RuntimeError):
            step.send(None)


def ssl_context() -> ssl.SSLContext:
    """Certificates as ``requests`` finds them: ``REQUESTS_CA_BUNDLE`` and so on, else certifi."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        path = os.environ.get(name)
        if path and os.path.isfile(path):
            return ssl.create_default_context(cafile=path)
    return httpx.create_ssl_context(trust_env=True)
