"""The PostgreSQL store's database: its connections, and transactions that notify.

Needs psycopg 3 (the ``postgres`` extra), imported when a store is made. The
tables (``pg_schema.py``) keep times as bigint microseconds, as in SQLite, so
both backends share every query.

Writers queue for one writer lock, and those that queue share one
transaction (group commit, ``group_commit.py``, with ``pg_group.py``'s
statements, on a pooled connection): each is answered, and the change feed
told, only after the ``COMMIT`` that holds its write. A transaction that
records a change takes the next number from the one-row ``ag_seq`` table,
whose row lock it holds until commit, and every batch takes a batch lock
before anything else (``pg_group.py`` says why): change numbers are therefore
committed in order, on any number of instances, and a waiter that saw number
``n`` has seen every change up to ``n``. The same transaction sends its
``NOTIFY`` (see ``pg_listen.py``), delivered at commit.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from approval_guard._codec.exact_json import InvalidJSON, canonical_json
from approval_guard._ledger.postgres import _NETWORK_DEFAULTS, redact_dsn
from approval_guard.provider.store.feed import ChangeFeed, Expected
from approval_guard.provider.store.group_commit import GroupCommit
from approval_guard.provider.store.models import Clock
from approval_guard.provider.store.pg_group import PostgresTransactions
from approval_guard.provider.store.pg_listen import Listener, settled_states
from approval_guard.provider.store.pg_schema import create_schema, translate
from approval_guard.provider.store.sql.base import Reader, SQLStoreBase, Tx, close_idle, to_us

#: Connections a store keeps for its reads and writes (the listener has its own).
POOL_SIZE = 8


class _Row:
    """A result row that, like ``sqlite3.Row``, indexes by position and by column name."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        return self._values[self._index[key] if isinstance(key, str) else key]


def _rows(cursor: Any) -> Callable[[Sequence[Any]], _Row]:
    index: dict[str, int] = {}
    for position, column in enumerate(cursor.description or ()):
        index.setdefault(column.name, position)
    return lambda values: _Row(values, index)


class _Conn:
    """A pooled connection speaking the shared dialect; refuses text PostgreSQL cannot keep."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Any:
        for value in params:
            if isinstance(value, str) and "\x00" in value:
                raise InvalidJSON("PostgreSQL cannot keep the character U+0000 in a text")
        return self.conn.execute(translate(sql), params)


class _PGTx(_Conn):
    """One write transaction: its change numbers come from ``ag_seq``, in commit order."""

    def __init__(self, conn: Any) -> None:
        super().__init__(conn)
        self.seq = 0
        self.changed: list[str] = []
        self.events: list[tuple[str, str, datetime, int]] = []

    def event(
        self,
        request_id: str,
        kind: str,
        at: datetime,
        actor_id: str | None,
        detail: dict[str, Any],
    ) -> int:
        # The next number and its event in one round trip (a decision makes a dozen).
        row = self.execute(
            "WITH bumped AS (UPDATE ag_seq SET seq = seq + 1 WHERE id = 1 RETURNING seq) "
            "INSERT INTO events (seq, request_id, at, type, actor_id, detail) "
            "SELECT seq, ?, ?, ?, ?, ? FROM bumped RETURNING seq",
            (request_id, to_us(at), kind, actor_id, canonical_json(detail)),
        )
        self.seq = int(row.fetchone()[0])
        self.changed.append(request_id)
        self.events.append((request_id, kind, at, self.seq))
        return self.seq

    def lock(self, name: str) -> None:
        # The batch lock, held since BEGIN, already keeps every other writer of the
        # schema out, on any instance (pg_group.py): a lock per name adds a round trip.
        del name


class PostgresDB(SQLStoreBase):
    """Connections and transactions of the store's tables in one PostgreSQL database."""

    _ORDER_KEY = "pos"
    # Two instances claiming webhook rows at once each take others (see _sql_outbox).
    _SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        pool_size: int = POOL_SIZE,
        connect_timeout: float = 5,
    ) -> None:
        super().__init__(clock=clock)
        try:
            import psycopg
            from psycopg import conninfo
        except ImportError as exc:
            raise ImportError(
                "PostgresStore needs psycopg 3: pip install 'approval-guard[postgres]'"
            ) from exc
        try:
            params = conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            # The parser's message quotes pieces of the DSN, which may be the password.
            raise ValueError(
                "malformed PostgreSQL DSN (details withheld: it may hold a password)"
            ) from None
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size!r}")
        self.path = redact_dsn(dsn)
        self._dsn = dsn
        self._kwargs: dict[str, Any] = {
            key: value for key, value in _NETWORK_DEFAULTS.items() if key not in params
        }
        self._kwargs["connect_timeout"] = max(1, int(connect_timeout))
        self._instance = uuid.uuid4().hex[:16]
        self._size = pool_size
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._count = 0
        self._count_lock = threading.Lock()
        with self._connection() as conn:
            schema = create_schema(conn)
        # One channel per schema: two deployments on one database never hear each other.
        self._channel = f"ag_changes_{schema}"[:63]
        self._feed = ChangeFeed(self._read_seq(), reads_ahead=True)
        self._writer = PostgresTransactions(
            self._take, self._give_back, channel=self._channel, instance=self._instance
        )
        self._group = GroupCommit(self._writer, self._feed.changed, self._check_open)
        self._listener = Listener(
            connect=self._connect,
            channel=self._channel,
            instance=self._instance,
            feed=self._feed,
            read_seq=self._read_seq,
            read_ahead=self._read_ahead,
        )

    def _read_ahead(self, expected: list[Expected]) -> dict[Expected, Any]:
        """On the listening thread: settled states for polls here, if a connection is idle."""
        try:
            conn = self._idle.get_nowait()  # never waits: a poll can read for itself
        except queue.Empty:
            return {}
        try:
            db = _Conn(conn)
            return settled_states(
                lambda request_id: db.execute(
                    "SELECT * FROM requests WHERE id = ?", (request_id,)
                ).fetchone(),
                expected,
            )
        finally:
            self._give_back(conn)

    def _connect(self) -> Any:
        import psycopg

        try:
            return psycopg.connect(self._dsn, autocommit=True, row_factory=_rows, **self._kwargs)
        except psycopg.OperationalError:
            # libpq's message may quote the DSN; name where, never how to log in.
            raise psycopg.OperationalError(
                f"could not connect to PostgreSQL at {self.path}"
            ) from None

    def _read_seq(self) -> int:
        with self._connection() as conn:
            return int(conn.execute("SELECT seq FROM ag_seq WHERE id = 1").fetchone()[0])

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        self._check_open()
        conn = self._take()
        try:
            yield conn
        finally:
            self._give_back(conn)

    def _take(self) -> Any:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._count_lock:
            grow = self._count < self._size
            if grow:
                self._count += 1
        if grow:
            try:
                return self._connect()
            except BaseException:
                with self._count_lock:
                    self._count -= 1
                raise
        while True:
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                self._check_open()

    def _give_back(self, conn: Any) -> None:
        from psycopg.pq import TransactionStatus

        if self._closed or conn.closed or conn.broken:
            conn.close()
            with self._count_lock:
                self._count -= 1
            return
        if conn.info.transaction_status != TransactionStatus.IDLE:
            conn.rollback()
        self._idle.put(conn)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Reader]:
        with self._connection() as conn:
            yield _Conn(conn)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Tx]:
        with self._grouped_write(self._group, lambda: _PGTx(self._writer.conn)) as tx:
            yield tx

    def close(self) -> None:
        """Commit an open batch, wake every waiter, stop listening, close. Idempotent."""
        with self._group.exclusive():
            if self._closed:
                return
            self._closed = True
        self._listener.close()
        close_idle(self._idle)
        self.wake_all()
