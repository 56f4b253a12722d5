"""The SQLite store's database: schema, one writer connection, a pool of readers, transactions.

Every write goes through the one writer connection, under a lock, in a
``BEGIN IMMEDIATE`` transaction (which also serialises writers in other
processes on the file), and is committed before the change feed hears of it.
WAL with ``synchronous=NORMAL`` survives a process crash, so a ``kill -9`` loses
nothing that was answered (only an operating-system crash may lose the last
transactions). Reads use a small pool of their own connections, so they never
queue behind a write; ``":memory:"`` has one connection, shared under the lock.

On a file, writers that queue for the lock share one transaction (group
commit, ``group_commit.py``, with ``sqlite_group.py``'s statements): each is
answered, and the change feed told, only after the ``COMMIT`` that holds its
write. ``":memory:"`` never groups: its readers share the writer connection,
and would see a batch before it commits.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from approval_guard._codec.exact_json import canonical_json
from approval_guard.provider.store.at_once import AtOnce, Outcome
from approval_guard.provider.store.feed import ChangeFeed
from approval_guard.provider.store.group_commit import GroupCommit
from approval_guard.provider.store.models import Clock
from approval_guard.provider.store.sql import grant_tables, outbox_tables
from approval_guard.provider.store.sql.base import Reader, SQLStoreBase, Tx, close_idle, to_us
from approval_guard.provider.store.sqlite_checkpoint import Checkpointer
from approval_guard.provider.store.sqlite_group import BUSY_TIMEOUT_MS, SQLiteTransactions

_SCHEMA_VERSION = "3"
#: Reader connections kept for a file database.
READERS = 4

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS credentials (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('instance', 'reviewer')),
    name         TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    roles        TEXT
);
CREATE TABLE IF NOT EXISTS requests (
    id              TEXT PRIMARY KEY,
    owner_id        TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body_sha256     TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    timeout         TEXT NOT NULL,
    status          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    deadline_at     INTEGER NOT NULL,
    decision_status TEXT,
    decision_note   TEXT,
    decided_at      INTEGER,
    expires_at      INTEGER,
    decided_by      TEXT,
    cancelled_at    INTEGER,
    cancel_reason   TEXT,
    poll_count      INTEGER NOT NULL DEFAULT 0,
    last_polled_at  INTEGER,
    editable        TEXT,
    decision_arguments TEXT,
    requested_by    TEXT,
    approvals_required INTEGER,
    approval_list   TEXT,
    decided_by_name TEXT,
    decision_grant  TEXT,
    batch           TEXT,
    context         TEXT,
    redacted        TEXT
);
CREATE INDEX IF NOT EXISTS requests_by_status ON requests (status, deadline_at);
CREATE INDEX IF NOT EXISTS requests_by_created ON requests (created_at);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    owner_id    TEXT NOT NULL,
    key         TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (owner_id, key)
);
CREATE TABLE IF NOT EXISTS events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    at         INTEGER NOT NULL,
    type       TEXT NOT NULL,
    actor_id   TEXT,
    detail     TEXT
);
CREATE INDEX IF NOT EXISTS events_by_request ON events (request_id, seq);
CREATE TABLE IF NOT EXISTS approvals (
    request_id  TEXT NOT NULL,
    reviewer_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (request_id, name)
);
CREATE TABLE IF NOT EXISTS audit (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    source     TEXT NOT NULL,
    action     TEXT NOT NULL,
    request_id TEXT,
    detail     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_request ON audit (request_id, seq);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit (at);
CREATE TABLE IF NOT EXISTS sessions (
    id_sha256     TEXT PRIMARY KEY,
    credential_id TEXT NOT NULL,
    csrf_token    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
"""

# Columns added since schema 1; a database made before them gets them on open.
_ADDED_COLUMNS = (
    ("requests", "editable", "TEXT"),
    ("requests", "decision_arguments", "TEXT"),
    ("credentials", "roles", "TEXT"),
    ("requests", "requested_by", "TEXT"),
    ("requests", "approvals_required", "INTEGER"),
    ("requests", "approval_list", "TEXT"),
    ("requests", "decided_by_name", "TEXT"),
    ("requests", "decision_grant", "TEXT"),
    ("requests", "batch", "TEXT"),
    ("requests", "context", "TEXT"),
    ("requests", "redacted", "TEXT"),
)


class _SQLiteTx:
    """A write transaction on the writer connection; remembers the changes it recorded."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.seq = 0
        self.changed: list[str] = []
        self.events: list[tuple[str, str, datetime, int]] = []

    def execute(self, sql: str, params: Any = (), /) -> sqlite3.Cursor:
        return self.db.execute(sql, params)

    def event(
        self,
        request_id: str,
        kind: str,
        at: datetime,
        actor_id: str | None,
        detail: dict[str, Any],
    ) -> int:
        cursor = self.db.execute(
            "INSERT INTO events (request_id, at, type, actor_id, detail) VALUES (?, ?, ?, ?, ?)",
            (request_id, to_us(at), kind, actor_id, canonical_json(detail)),
        )
        self.seq = int(cursor.lastrowid or 0)
        self.changed.append(request_id)
        self.events.append((request_id, kind, at, self.seq))
        return self.seq

    def lock(self, name: str) -> None:
        # BEGIN IMMEDIATE already holds the file's one write lock.
        del name


class SQLiteDB(SQLStoreBase):
    """Connections and transactions of a SQLite file (or ``":memory:"``)."""

    _ORDER_KEY = "rowid"

    def __init__(self, path: str = "approvals.sqlite3", *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self.path = str(path)
        self._memory = self.path == ":memory:"
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._readers = 0
        self._readers_lock = threading.Lock()
        self._db = self._connect()
        self._checkpoints = Checkpointer(self.path, self._restart_wal)
        if not self._memory:
            # Checkpoints run off the writers' path (sqlite_checkpoint.py), never in a COMMIT.
            self._db.execute("PRAGMA wal_autocheckpoint=0")
        self._transactions = SQLiteTransactions(self._db)
        self._group = GroupCommit(self._transactions, self._changed, self._check_open)
        self._lock = self._group.lock
        self._at_once = AtOnce(
            self._group, _no_checkpoint if self._memory else self._checkpoints.wrote
        )
        with self._lock:
            self._db.executescript(_SCHEMA)
            self._add_columns()
            for statement in (*grant_tables.SCHEMA, *outbox_tables.SCHEMA):
                self._db.execute(statement)
            self._migrate()
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (_SCHEMA_VERSION,),
            )
            row = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
            # In WAL mode, from now on the writer never waits inside SQLite: a batch begins
            # at once or waits in SQLiteTransactions.begin, so the event loop can try
            # without waiting. A file SQLite could not put in WAL mode (some network
            # filesystems) has readers and writers block each other even at COMMIT: its
            # writer keeps SQLite's busy timeout, and nothing runs on the loop.
            mode = str(self._db.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            self._at_once_ok = self._memory or mode == "wal"
            if not self._memory and self._at_once_ok:
                self._db.execute("PRAGMA busy_timeout=0")
        self._feed = ChangeFeed(int(row[0]))

    def _connect(self) -> sqlite3.Connection:
        # check_same_thread=False: a connection serves one thread at a time, but not
        # always the same one. isolation_level=None: we issue BEGIN ourselves.
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.row_factory = sqlite3.Row
        if not self._memory:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # Two stores on one file (a test re-opening it) wait instead of failing.
            db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        return db

    def _migrate(self) -> None:
        """Move an older release's outboxes and links into the one outbox, in one transaction."""

        def exists(table: str) -> bool:
            found = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            return found is not None

        if not any(exists(table) for table in outbox_tables.OLD_TABLES):
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            outbox_tables.migrate(self._db.execute, exists)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _add_columns(self) -> None:
        """Give a database made by an older version the columns added since."""
        for table, column, kind in _ADDED_COLUMNS:
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column in present:
                continue
            try:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            except sqlite3.OperationalError as exc:
                # Another process opening the same file may have added it first.
                if "duplicate column" not in str(exc):
                    raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The writer connection inside one committed transaction, under the store's lock.

        For small extensions such as :mod:`approval_guard.testing`; the HTTP
        layer uses the store's methods. It never begins inside a batch of the
        store's own writes: one open when it gets the lock is committed first.
        """
        with self._group.exclusive():
            self._check_open()
            self._transactions.begin()
            try:
                yield self._db
            except BaseException:
                self._group.rollback()
                raise
            try:
                self._db.execute("COMMIT")
            except BaseException:
                # A failed COMMIT (a deferred constraint) leaves it open: start clean.
                self._group.rollback()
                raise
        if not self._memory:
            self._checkpoints.wrote()

    def run_at_once(
        self, calls: Sequence[Callable[[], Any]], *, until: float | None = None
    ) -> list[Outcome[Any]] | None:
        """Run store calls on this thread in one transaction, if nothing must wait (else None).

        See :mod:`~approval_guard.provider.store.at_once`. With ``":memory:"``
        too: its readers share the writer connection, under the lock this holds.
        Never for a file not in WAL mode (see ``__init__``).
        """
        if not self._at_once_ok:
            return None
        return self._at_once.run(calls, until=until)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Tx]:
        batch = self._at_once.batch()
        if batch is not None:
            with self._group.member(batch):
                tx = _SQLiteTx(self._db)
                yield tx
                self._before_commit(tx, tx.events)
                batch.keep(tx.seq, tx.changed)
            return
        if self._memory:
            # Never grouped: readers share this connection and would see an open batch.
            with self.transaction() as db:
                tx = _SQLiteTx(db)
                yield tx
                self._before_commit(tx, tx.events)
            # Committed: only now may anyone hear of it.
            if tx.changed:
                self._changed(tx.seq, tuple(dict.fromkeys(tx.changed)))
            return
        with self._grouped_write(self._group, lambda: _SQLiteTx(self._db)) as tx:
            yield tx
        self._checkpoints.wrote()

    def _restart_wal(self) -> None:
        """Copy what the WAL holds into the file and start it over (a checkpoint's last step).

        ``RESTART`` waits (SQLite's busy handler) for readers still in the WAL; the writer's
        busy timeout is 0, so it is set for this statement alone, or the restart would give
        up on the first reader it met and the WAL would grow on behind it.
        """
        with self._group.exclusive():
            if self._closed:
                return
            self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            try:
                self._db.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
            finally:
                self._db.execute(
                    f"PRAGMA busy_timeout={0 if self._at_once_ok else BUSY_TIMEOUT_MS}"
                )

    def _changed(self, seq: int, request_ids: tuple[str, ...]) -> None:
        self._feed.changed(seq, request_ids)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Reader]:
        if self._memory or self._at_once.batch() is not None:
            with self._lock:
                self._check_open()
                yield self._db
            return
        self._check_open()
        db = self._take_reader()
        try:
            yield db
        finally:
            if self._closed:
                db.close()
            else:
                self._idle.put(db)

    def _take_reader(self) -> sqlite3.Connection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._readers_lock:
            grow = self._readers < READERS
            if grow:
                self._readers += 1
        if grow:
            db = self._connect()
            db.execute("PRAGMA query_only=ON")
            return db
        while True:
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                self._check_open()

    def close(self) -> None:
        """Wake every waiter and close the database (an open batch commits first). Idempotent."""
        with self._group.exclusive():
            if self._closed:
                return
            self._closed = True
            self._db.close()
        self._checkpoints.close()
        close_idle(self._idle)
        self.wake_all()


def _no_checkpoint(writes: int) -> None:
    """``":memory:"`` has no WAL to checkpoint."""
    del writes
