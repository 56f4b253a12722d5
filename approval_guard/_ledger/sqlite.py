"""The execution record in a SQLite file: at most once across the processes of one host.

A file made before rows kept ``arguments_digest`` gains the column when it is
opened; its old rows read with no digest.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime, timedelta, timezone
from typing import Any

from approval_guard._codec.now import utcnow
from approval_guard._ledger.connection import ProcessConnection
from approval_guard._ledger.protocol import FAILED, FINISHED, STARTED, Execution, check_digest
from approval_guard.exceptions import LedgerError

__all__ = ["SQLiteLedger"]


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
    error      TEXT,
    arguments_digest TEXT
);
CREATE INDEX IF NOT EXISTS executions_started_at ON executions (started_at);
"""

_SQLITE_COLUMNS = "request_id, tool, state, worker, started_at, ended_at, error, arguments_digest"


def _add_digest_column(conn: sqlite3.Connection) -> None:
    """Give a table made by an earlier version the ``arguments_digest`` column."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(executions)")}
    if "arguments_digest" in columns:
        return
    try:
        conn.execute("ALTER TABLE executions ADD COLUMN arguments_digest TEXT")
    except sqlite3.OperationalError as exc:
        # Another process opening the same file at the same moment added it first.
        if "duplicate column name" not in str(exc).lower():
            raise


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

    Args:
        path: The SQLite database file (made if missing; never on a network file system).
        timeout: Seconds to wait for another process's lock on the file.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self._path = os.fspath(path)
        self._timeout = timeout
        self._held = ProcessConnection(self._open)
        with self._held.lock:
            self._held.get()  # fail at construction, not at the first approved call

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        return f"SQLiteLedger({self._path!r})"

    def close(self) -> None:
        """Close the connection; the next operation opens a new one."""
        self._held.close()

    def _open(self) -> sqlite3.Connection:
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
                _add_digest_column(conn)
            except BaseException:
                conn.close()
                raise
        except sqlite3.Error as exc:
            raise LedgerError(f"SQLite ledger {self._path!r}: cannot open: {exc}") from exc
        return conn

    def _execute(self, what: str, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        with self._held.lock:
            conn = self._held.get()
            try:
                return conn.execute(sql, params)
            except sqlite3.Error as exc:
                raise LedgerError(f"SQLite ledger {self._path!r}: {what} failed: {exc}") from exc

    def _query(self, what: str, sql: str, params: tuple[object, ...] = ()) -> list[Execution]:
        with self._held.lock:
            conn = self._held.get()
            try:
                rows = conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise LedgerError(f"SQLite ledger {self._path!r}: {what} failed: {exc}") from exc
        return [_execution(row) for row in rows]

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won.

        ``arguments_digest`` (None, or 64 lowercase hex characters) is stored with the row.

        Args:
            request_id: The approval request's id (one row per approved request).
            tool: The tool's name, kept with the row.
            worker: Who runs the call (host and process), kept with the row.
            arguments_digest: Lowercase hex SHA-256 of the canonical JSON of the arguments that run,
                or None; anything else is ValueError before anything is written.
        """
        digest = check_digest(arguments_digest)
        cursor = self._execute(
            "claim",
            f"INSERT INTO executions ({_SQLITE_COLUMNS}) VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)"
            " ON CONFLICT (request_id) DO NOTHING",
            (request_id, tool, STARTED, worker, _fmt_ts(utcnow()), digest),
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
        """Mark a claimed call as ``finished``.

        Args:
            request_id: The claimed request's id.
        """
        self._end(request_id, FINISHED, None)

    def fail(self, request_id: str, error: str) -> None:
        """Mark a claimed call as ``failed`` (it ran and raised; it still counts as run).

        Args:
            request_id: The claimed request's id.
            error: What the tool raised (kept, cut to 1,000 characters).
        """
        self._end(request_id, FAILED, error)

    def release(self, request_id: str) -> None:
        """Give back a claim whose call never started; a finished or failed row stays.

        Args:
            request_id: The claimed request's id.
        """
        self._execute(
            "release",
            "DELETE FROM executions WHERE request_id = ? AND state = ?",
            (request_id, STARTED),
        )

    def get(self, request_id: str) -> Execution | None:
        """The row for ``request_id``, or None.

        Args:
            request_id: The request's id.
        """
        rows = self._query(
            "get",
            f"SELECT {_SQLITE_COLUMNS} FROM executions WHERE request_id = ?",
            (request_id,),
        )
        return rows[0] if rows else None

    def recent(self, limit: int = 50) -> list[Execution]:
        """The newest rows first.

        Args:
            limit: How many rows at most.
        """
        return self._query(
            "recent",
            f"SELECT {_SQLITE_COLUMNS} FROM executions"
            " ORDER BY started_at DESC, request_id LIMIT ?",
            (limit,),
        )

    def prune(self, older_than: timedelta) -> int:
        """Delete rows that ended (or started) more than ``older_than`` ago; return the count.

        Args:
            older_than: How long ago a row must have ended (or started) to go.
        """
        cursor = self._execute(
            "prune",
            "DELETE FROM executions WHERE COALESCE(ended_at, started_at) < ?",
            (_fmt_ts(utcnow() - older_than),),
        )
        return cursor.rowcount


def _execution(row: tuple[Any, ...]) -> Execution:
    request_id, tool, state, worker, started_at, ended_at, error, arguments_digest = row
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
        arguments_digest=arguments_digest,
    )
