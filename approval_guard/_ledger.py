"""The execution record: which approved requests' calls have started, keyed by request id.

An approval record at the provider does not say whether the tool ran. The
ledger does: before an approved call starts, the guard *claims* the request id;
only the one claimer may start the call. A claim is written before the call and
marked ``finished`` or ``failed`` after it, so a crash in between leaves
``started``, which counts as run (at most once, never twice).

Implementations: :class:`MemoryLedger` (one process), ``SQLiteLedger`` (one
host, several processes), ``PostgresLedger`` (a fleet). All keep the
:class:`Ledger` protocol.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, runtime_checkable

import attrs

from .exceptions import LedgerError

STARTED = "started"
FINISHED = "finished"
FAILED = "failed"
STATES = (STARTED, FINISHED, FAILED)


def default_worker() -> str:
    """``host:pid``, the default name of the worker that runs a call."""
    return f"{socket.gethostname()}:{os.getpid()}"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@attrs.frozen
class Execution:
    """One row of the execution record."""

    request_id: str
    tool: str
    state: str
    worker: str
    started_at: datetime
    ended_at: datetime | None = None
    error: str | None = None


@runtime_checkable
class Ledger(Protocol):
    """The execution record's contract.

    ``claim`` is atomic across every process that shares the record: of all
    the callers claiming one request id, exactly one gets True, ever (until a
    claim is released). Any failure to reach the record raises
    :class:`~approval_guard.exceptions.LedgerError`; the guard then does not
    run the tool.
    """

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won."""
        ...

    def finish(self, request_id: str) -> None:
        """Mark a claimed call as ``finished``."""
        ...

    def fail(self, request_id: str, error: str) -> None:
        """Mark a claimed call as ``failed`` (it ran and raised; it still counts as run)."""
        ...

    def release(self, request_id: str) -> None:
        """Give back a claim whose call never started (for example, the approval expired)."""
        ...

    def get(self, request_id: str) -> Execution | None:
        """The row for ``request_id``, or None."""
        ...

    def recent(self, limit: int = 50) -> list[Execution]:
        """The newest rows first."""
        ...

    def prune(self, older_than: timedelta) -> int:
        """Delete rows that ended (or started) more than ``older_than`` ago; return the count."""
        ...


class MemoryLedger:
    """An in-process execution record: at most once within one process.

    It forgets everything when the process exits; use ``SQLiteLedger`` when a
    restarted process may recover an approval that an earlier one used.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, Execution] = {}

    def __repr__(self) -> str:
        return f"MemoryLedger(rows={len(self._rows)})"

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        with self._lock:
            if request_id in self._rows:
                return False
            self._rows[request_id] = Execution(
                request_id=request_id, tool=tool, state=STARTED, worker=worker, started_at=utcnow()
            )
            return True

    def _end(self, request_id: str, state: str, error: str | None) -> None:
        with self._lock:
            row = self._rows.get(request_id)
            if row is not None and row.state == STARTED:
                self._rows[request_id] = attrs.evolve(
                    row, state=state, ended_at=utcnow(), error=error
                )

    def finish(self, request_id: str) -> None:
        self._end(request_id, FINISHED, None)

    def fail(self, request_id: str, error: str) -> None:
        self._end(request_id, FAILED, error)

    def release(self, request_id: str) -> None:
        with self._lock:
            row = self._rows.get(request_id)
            if row is not None and row.state == STARTED:
                del self._rows[request_id]

    def get(self, request_id: str) -> Execution | None:
        with self._lock:
            return self._rows.get(request_id)

    def recent(self, limit: int = 50) -> list[Execution]:
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda r: r.started_at, reverse=True)
        return rows[:limit]

    def prune(self, older_than: timedelta) -> int:
        cutoff = utcnow() - older_than
        with self._lock:
            old = [k for k, r in self._rows.items() if (r.ended_at or r.started_at) < cutoff]
            for key in old:
                del self._rows[key]
        return len(old)


_PROCESS_LEDGER = MemoryLedger()


def process_ledger() -> MemoryLedger:
    """The execution record every Guard uses unless given one: one per process.

    Shared, so that a harness that builds a Guard per session and retries a
    call with the same key still runs the approved call at most once.
    """
    return _PROCESS_LEDGER


class ProviderLedger:
    """One provider's view of an execution record: request ids are scoped by provider.

    Two providers may both hand out id ``1``; in the underlying record a row is
    keyed ``"<provider URL> <request id>"`` (a URL has no spaces), so their
    calls never share a claim. Through this view the ids are the provider's own.
    """

    def __init__(self, record: Ledger, provider: str) -> None:
        if any(ch.isspace() for ch in provider):
            raise ValueError("a provider URL has no whitespace")
        self.record = record
        self.provider = provider
        self._prefix = provider + " "

    def __repr__(self) -> str:
        return repr(self.record)

    def key(self, request_id: str) -> str:
        """The row's key in the underlying record."""
        return self._prefix + request_id

    def _own(self, row: Execution | None) -> Execution | None:
        if row is None or not row.request_id.startswith(self._prefix):
            return None
        return attrs.evolve(row, request_id=row.request_id[len(self._prefix) :])

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        return self.record.claim(self.key(request_id), tool=tool, worker=worker)

    def finish(self, request_id: str) -> None:
        self.record.finish(self.key(request_id))

    def fail(self, request_id: str, error: str) -> None:
        self.record.fail(self.key(request_id), error)

    def release(self, request_id: str) -> None:
        self.record.release(self.key(request_id))

    def get(self, request_id: str) -> Execution | None:
        return self._own(self.record.get(self.key(request_id)))

    def recent(self, limit: int = 50) -> list[Execution]:
        """This provider's rows among the record's newest ``limit``, newest first."""
        rows = (self._own(row) for row in self.record.recent(limit))
        return [row for row in rows if row is not None]

    def prune(self, older_than: timedelta) -> int:
        """Prunes the whole record (every provider's rows), as its own ``prune`` does."""
        return self.record.prune(older_than)


def _fmt_ts(when: datetime) -> str:
    # Fixed width (always microseconds, always +00:00) so that text order is time order
    # and SQL can compare the column as text.
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds")


def _parse_ts(text: str | None) -> datetime | None:
    if text is None:
        return None
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS executions (
    request_id TEXT PRIMARY KEY NOT NULL,
    tool       TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('started', 'finished', 'failed')),
    worker     TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at   TEXT,
    error      TEXT
);
CREATE INDEX IF NOT EXISTS executions_started_at ON executions (started_at);
"""

_SQLITE_COLUMNS = "request_id, tool, state, worker, started_at, ended_at, error"


class SQLiteLedger:
    """An execution record in a SQLite file: at most once across the processes of one host.

    Every claim is committed (and synced to disk) before the call starts, so a
    crash or a ``kill -9`` leaves ``started`` behind and a restarted worker with
    the same approval gets ``ALREADY_EXECUTED``. Several processes may share the
    file: the database runs in WAL mode, waits up to ``timeout`` seconds for a
    lock, and a claim is one ``INSERT ... ON CONFLICT DO NOTHING`` against the
    primary key, so exactly one of any number of racing claimers wins.

    Do not put the file on a network file system (NFS, SMB): SQLite's locks
    are not reliable there. For several hosts, use ``PostgresLedger``.

    ::

        guard = ag.Guard(..., ledger=ag.SQLiteLedger("/var/lib/agent/executions.sqlite3"))
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self._path = os.fspath(path)
        self._timeout = timeout
        # One connection behind a lock: each operation is a single short statement,
        # so there is nothing to gain from a connection per thread.
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        # Connections inherited through fork(): kept referenced so that garbage collection
        # in the child never closes (and possibly checkpoints) the parent's connection.
        self._inherited: list[sqlite3.Connection] = []
        with self._lock:
            self._connection()  # fail at construction, not at the first approved call

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        return f"SQLiteLedger({self._path!r})"

    def close(self) -> None:
        """Close the connection; the next operation opens a new one."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()

    def _connection(self) -> sqlite3.Connection:
        # Caller holds self._lock.
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:
            # After a fork the connection belongs to the parent: never use or close it here.
            self._inherited.append(self._conn)
            self._conn = None
        try:
            # isolation_level=None: autocommit, so every statement is its own transaction
            # that takes the write lock at once (a deferred read-then-write transaction
            # could fail with SQLITE_BUSY without waiting).
            conn = sqlite3.connect(
                self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                # FULL: a committed claim survives power loss too, not only a process crash.
                conn.execute("PRAGMA synchronous = FULL")
                conn.executescript(_SQLITE_SCHEMA)
            except BaseException:
                conn.close()
                raise
        except sqlite3.Error as exc:
            raise LedgerError(f"SQLite ledger {self._path!r}: cannot open: {exc}") from exc
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _execute(self, what: str, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            conn = self._connection()
            try:
                return conn.execute(sql, params)
            except sqlite3.Error as exc:
                raise LedgerError(f"SQLite ledger {self._path!r}: {what} failed: {exc}") from exc

    def _query(self, what: str, sql: str, params: tuple[object, ...] = ()) -> list[Execution]:
        with self._lock:
            conn = self._connection()
            try:
                rows = conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise LedgerError(f"SQLite ledger {self._path!r}: {what} failed: {exc}") from exc
        return [_execution(row) for row in rows]

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won."""
        cursor = self._execute(
            "claim",
            f"INSERT INTO executions ({_SQLITE_COLUMNS}) VALUES (?, ?, ?, ?, ?, NULL, NULL)"
            " ON CONFLICT (request_id) DO NOTHING",
            (request_id, tool, STARTED, worker, _fmt_ts(utcnow())),
        )
        return cursor.rowcount == 1

    def _end(self, request_id: str, state: str, error: str | None) -> None:
        self._execute(
            state,
            "UPDATE executions SET state = ?, ended_at = ?, error = ?"
            " WHERE request_id = ? AND state = ?",
            (state, _fmt_ts(utcnow()), error, request_id, STARTED),
        )

    def finish(self, request_id: str) -> None:
        """Mark a claimed call as ``finished``."""
        self._end(request_id, FINISHED, None)

    def fail(self, request_id: str, error: str) -> None:
        """Mark a claimed call as ``failed`` (it ran and raised; it still counts as run)."""
        self._end(request_id, FAILED, error)

    def release(self, request_id: str) -> None:
        """Give back a claim whose call never started; a finished or failed row stays."""
        self._execute(
            "release",
            "DELETE FROM executions WHERE request_id = ? AND state = ?",
            (request_id, STARTED),
        )

    def get(self, request_id: str) -> Execution | None:
        """The row for ``request_id``, or None."""
        rows = self._query(
            "get",
            f"SELECT {_SQLITE_COLUMNS} FROM executions WHERE request_id = ?",
            (request_id,),
        )
        return rows[0] if rows else None

    def recent(self, limit: int = 50) -> list[Execution]:
        """The newest rows first."""
        return self._query(
            "recent",
            f"SELECT {_SQLITE_COLUMNS} FROM executions"
            " ORDER BY started_at DESC, request_id LIMIT ?",
            (limit,),
        )

    def prune(self, older_than: timedelta) -> int:
        """Delete rows that ended (or started) more than ``older_than`` ago; return the count."""
        cursor = self._execute(
            "prune",
            "DELETE FROM executions WHERE COALESCE(ended_at, started_at) < ?",
            (_fmt_ts(utcnow() - older_than),),
        )
        return cursor.rowcount


def _execution(row: tuple[Any, ...]) -> Execution:
    request_id, tool, state, worker, started_at, ended_at, error = row
    started = _parse_ts(started_at)
    assert started is not None  # NOT NULL in the schema
    return Execution(
        request_id=request_id,
        tool=tool,
        state=state,
        worker=worker,
        started_at=started,
        ended_at=_parse_ts(ended_at),
        error=error,
    )
