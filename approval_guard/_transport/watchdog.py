"""An exchange's whole deadline kept on the calling thread: a watchdog shuts its socket at the end.

``requests``' timeouts bound each socket operation, not the exchange: a provider
that drips its answer a byte at a time never trips them. So an exchange run on
the calling thread (no helper to stop waiting for) is watched: :func:`kept`
arms a deadline that the connection classes of :class:`WatchedAdapter` attach
to, and one daemon thread shuts down the attached socket when the deadline
passes, which ends a blocked read at once (it sees the connection closed).
A deadline disarmed before it fires never touches its connection again, so a
connection back in the pool is never shut by the exchange that used it last.

Only the socket's own waits are cut short: a DNS lookup is not, so the sync
client watches exchanges only with a provider named by its IP address.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests.adapters
import urllib3.connection
import urllib3.connectionpool

#: A fired deadline may be this late (seconds): the watchdog wakes at most this often.
GRAIN = 0.02


class Deadline:
    """One exchange's deadline (``time.monotonic``), and the socket it is using."""

    __slots__ = ("at", "done", "fired", "sock")

    def __init__(self, at: float) -> None:
        self.at = at
        # The socket itself, not its connection: http.client lets go of a connection's
        # socket (``conn.sock = None``) while its response is still being read.
        self.sock: socket.socket | None = None
        self.done = False
        self.fired = False


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "approval_guard_deadline", default=None
)


def _shut(sock: socket.socket | None) -> None:
    if sock is None:
        return
    # The plain socket's shutdown, also under TLS: an SSLSocket's own would drop
    # its TLS object while the calling thread is reading with it.
    with contextlib.suppress(OSError):  # closed already
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """One thread for every watched exchange: fires each deadline not disarmed in time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._wakes_at = float("inf")

    def arm(self, at: float) -> Deadline:
        deadline = Deadline(at)
        with self.lock:
            heapq.heappush(self._heap, (at, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="approval_guard-watchdog", daemon=True
                )
                self._thread.start()
            elif at < self._wakes_at - GRAIN:
                self._wake.notify()
        return deadline

    def disarm(self, deadline: Deadline) -> None:
        with self.lock:
            deadline.done = True
            heap = self._heap
            while heap and heap[0][2].done:
                heapq.heappop(heap)

    def attach(self, deadline: Deadline, conn: Any) -> None:
        """``conn`` now carries the exchange (or has just connected for it).

        Refused before a connect or a send when the deadline has passed; a socket
        connected after it passed is shut at once.
        """
        with self.lock:
            sock = getattr(conn, "sock", None)
            if sock is not None:
                deadline.sock = sock
            if deadline.fired:
                _shut(sock)
                raise TimeoutError("the exchange's deadline passed")

    def _run(self) -> None:
        heap = self._heap
        with self.lock:
            while True:
                now = time.monotonic()
                while heap and (heap[0][2].done or heap[0][0] <= now):
                    _, _, deadline = heapq.heappop(heap)
                    if not deadline.done:
                        deadline.fired = True
                        _shut(deadline.sock)
                # Never sooner than GRAIN from now: expired entries go in batches.
                self._wakes_at = max(heap[0][0], now + GRAIN) if heap else float("inf")
                self._wake.wait(None if not heap else self._wakes_at - now)


_watchdog = _Watchdog()
_pid = os.getpid()  # the process whose thread _watchdog may have started


def _forget_watchdog() -> None:
    """In a forked child: the parent's watchdog thread is not running here."""
    global _watchdog, _pid
    _watchdog, _pid = _Watchdog(), os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_watchdog)


@contextmanager
def kept(seconds: float) -> Iterator[Deadline]:
    """Watch the block's exchange: its socket is shut ``seconds`` from now (see ``fired``)."""
    if _pid != os.getpid():
        # Forked by C code that runs no at-fork hook (uWSGI's workers): a deadline armed
        # on the parent's watchdog would never fire here, and nothing would end the read.
        _forget_watchdog()
    watchdog = _watchdog
    deadline = watchdog.arm(time.monotonic() + seconds)
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)
        watchdog.disarm(deadline)


class _Watched:
    """Attaches a connection to the exchange being watched in this context (if any)."""

    def connect(self) -> None:
        deadline = _CURRENT.get()
        if deadline is None:
            super().connect()  # type: ignore[misc]
            return
        watchdog = _watchdog
        watchdog.attach(deadline, self)
        super().connect()  # type: ignore[misc]
        watchdog.attach(deadline, self)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        deadline = _CURRENT.get()
        if deadline is not None:
            _watchdog.attach(deadline, self)
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_Watched, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_Watched, urllib3.connection.HTTPSConnection):
    pass


class _HTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class WatchedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter whose direct connections attach to a watched exchange."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
