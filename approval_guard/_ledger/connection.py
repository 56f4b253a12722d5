"""One database connection per process, shared by its threads, never used across ``fork()``.

Both SQL ledgers hold one connection behind a lock (each operation is a single
short statement, so a connection per thread gains nothing). A child process
made by ``fork()`` inherits the parent's connection object but must never use
it or close it: the socket (or the SQLite file's locks) belong to the parent.
The child opens its own, and keeps the inherited one referenced so that
garbage collection in the child never closes it (a PostgreSQL goodbye on the
shared socket, a SQLite checkpoint on the parent's file).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["ProcessConnection"]


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


def _always(conn: object) -> bool:
    return True


class ProcessConnection(Generic[C]):
    """This process's connection, opened on demand by ``open``.

    ``usable`` says whether a held connection may still be used (PostgreSQL's
    may break); an unusable one is dropped and a new one opened. Callers hold
    :attr:`lock` around :meth:`get`, :meth:`drop` and their use of the
    connection; :meth:`close` takes it itself.
    """

    def __init__(self, open: Callable[[], C], *, usable: Callable[[C], bool] = _always) -> None:
        self.lock = threading.Lock()
        self._open = open
        self._usable = usable
        self._conn: C | None = None
        self._pid = os.getpid()
        self._inherited: list[C] = []

    def _forget_inherited(self) -> None:
        if self._pid != os.getpid():
            if self._conn is not None:
                self._inherited.append(self._conn)
            self._conn, self._pid = None, os.getpid()

    @property
    def held(self) -> C | None:
        """The connection held now, if any (without opening one)."""
        return self._conn

    def get(self) -> C:
        """This process's connection, opened if there is none (or it is unusable)."""
        self._forget_inherited()
        conn = self._conn
        if conn is not None and self._usable(conn):
            return conn
        self.drop()
        conn = self._open()
        self._conn = conn
        return conn

    def drop(self) -> None:
        """Close and forget a broken connection, so that the next :meth:`get` reconnects."""
        self._forget_inherited()
        conn, self._conn = self._conn, None
        if conn is not None:
            # Closing a dead connection may fail too; there is nothing left to clean up.
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close the connection; the next :meth:`get` opens a new one."""
        with self.lock:
            self._forget_inherited()
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
