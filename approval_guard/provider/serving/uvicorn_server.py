"""uvicorn's server as the provider runs it: stopped by an event, drained before it stops.

uvicorn checks for a stop every 0.1 s; tests start and stop a provider
thousands of times, so here a stop is an :class:`asyncio.Event`. Its shutdown
is ours too: graceful, every waiting poll is answered with the current state
(the notifier drains) and answers in flight may finish for
:data:`GRACEFUL_SECONDS`; a kill closes every connection at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from typing import Any

import uvicorn

from approval_guard.provider.http.limits import GRACEFUL_SECONDS


def bind(host: str, port: int) -> socket.socket:
    """The listening socket the server serves on, bound ahead (so its URL is known at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only then (delayed ACKs would add 40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


class UvicornServer(uvicorn.Server):
    """uvicorn's server, stopped by an event rather than a 0.1 s tick, and drained our way."""

    def __init__(self, config: uvicorn.Config, app: Any) -> None:
        super().__init__(config)
        self.app = app
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.graceful = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()

    async def main_loop(self) -> None:
        assert self._stop is not None
        if not self.should_exit:
            await self._stop.wait()

    def request_stop(self, *, graceful: bool) -> None:
        """From any thread: stop serving (a kill when not ``graceful``)."""
        self.graceful = self.graceful and graceful
        self.should_exit = True
        loop, stop = self.loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already ended
                loop.call_soon_threadsafe(stop.set)

    def handle_exit(self, sig: int, frame: Any) -> None:
        # SIGINT/SIGTERM while serve_forever() runs in the main thread: drain and stop.
        self.request_stop(graceful=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in getattr(self, "servers", ()):
            server.close()
        connections = self.server_state.connections
        if self.graceful:
            ctx = getattr(self.app.state, "ctx", None)
            if ctx is not None:
                ctx.notifier.drain()
            for connection in list(connections):
                connection.shutdown()
            loop = asyncio.get_running_loop()
            end = loop.time() + GRACEFUL_SECONDS
            while connections and loop.time() < end:
                await asyncio.sleep(0.01)
        for connection in list(connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        await self.lifespan.shutdown()
