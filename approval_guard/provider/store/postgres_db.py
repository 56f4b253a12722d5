"""The PostgreSQL store's database: schema, a pool of connections, transactions that notify.

Needs psycopg 3 (the ``postgres`` extra), imported when a store is made. The
tables are prefixed ``ag_`` (beside the execution record's own) and created on
first open under ``pg_advisory_xact_lock``, so two instances opening one empty
database at once do not trip over each other. Times are bigint microseconds,
as in SQLite, so both backends share every query.

Each write is one transaction. One that records a change takes the next number
from the one-row ``ag_seq`` table, whose row lock it holds until commit: change
numbers are therefore committed in order, on any number of instances, and a
waiter that saw number ``n`` has seen every change up to ``n``. The same
transaction sends its ``NOTIFY`` (see ``pg_listen.py``), delivered at commit.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import queue
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from approval_guard._codec.exact_json import InvalidJSON, canonical_json
from approval_guard._ledger.postgres import _NETWORK_DEFAULTS, redact_dsn
from approval_guard.provider.store.feed import ChangeFeed, Expected
from approval_guard.provider.store.models import Clock
from approval_guard.provider.store.pg_listen import Listener, payloads, settled_states
from approval_guard.provider.store.sql import email_tables
from approval_guard.provider.store.sql.base import Reader, SQLStoreBase, Tx, close_idle, to_us
from approval_guard.provider.store.sql.slack import POSTGRES_SCHEMA as _SLACK_SCHEMA
from approval_guard.provider.store.sql.slack import SLACK_TABLES

#: Connections a store keeps for its reads and writes (the listener has its own).
POOL_SIZE = 8

_TABLES = (
    "meta",
    "credentials",
    "requests",
    "idempotency_keys",
    "events",
    "sessions",
    "approvals",
    "audit",
    "webhook_outbox",
    "webhook_attempts",
    *SLACK_TABLES,
    *email_tables.TABLES,
)
_TABLE_WORD = re.compile(r"\b(" + "|".join(_TABLES) + r")\b")
# The advisory lock held while the schema is created.
_SCHEMA_LOCK = int.from_bytes(
    hashlib.sha256(b"approval_guard.provider schema").digest()[:8], "big", signed=True
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ag_meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS ag_seq "
    "(id integer PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL)",
    "INSERT INTO ag_seq (id, seq) VALUES (1, 0) ON CONFLICT DO NOTHING",
    """CREATE TABLE IF NOT EXISTS ag_credentials (
        pos          bigserial,
        id           text PRIMARY KEY,
        kind         text NOT NULL CHECK (kind IN ('instance', 'reviewer')),
        name         text NOT NULL,
        token_sha256 text NOT NULL UNIQUE,
        created_at   bigint NOT NULL,
        revoked_at   bigint)""",
    """CREATE TABLE IF NOT EXISTS ag_requests (
        pos                bigserial,
        id                 text PRIMARY KEY,
        owner_id           text NOT NULL,
        idempotency_key    text NOT NULL,
        body_sha256        text NOT NULL,
        tool               text NOT NULL,
        arguments          text NOT NULL,
        timeout            text NOT NULL,
        status             text NOT NULL,
        created_at         bigint NOT NULL,
        deadline_at        bigint NOT NULL,
        decision_status    text,
        decision_note      text,
        decided_at         bigint,
        expires_at         bigint,
        decided_by         text,
        cancelled_at       bigint,
        cancel_reason      text,
        poll_count         bigint NOT NULL DEFAULT 0,
        last_polled_at     bigint,
        editable           text,
        decision_arguments text)""",
    "CREATE INDEX IF NOT EXISTS ag_requests_by_status ON ag_requests (status, deadline_at)",
    "CREATE INDEX IF NOT EXISTS ag_requests_by_created ON ag_requests (created_at, pos)",
    """CREATE TABLE IF NOT EXISTS ag_idempotency_keys (
        owner_id    text NOT NULL,
        key         text NOT NULL,
        body_sha256 text NOT NULL,
        request_id  text NOT NULL,
        created_at  bigint NOT NULL,
        PRIMARY KEY (owner_id, key))""",
    "CREATE INDEX IF NOT EXISTS ag_idempotency_keys_by_created ON ag_idempotency_keys (created_at)",
    """CREATE TABLE IF NOT EXISTS ag_events (
        seq        bigint PRIMARY KEY,
        request_id text NOT NULL,
        at         bigint NOT NULL,
        type       text NOT NULL,
        actor_id   text,
        detail     text)""",
    "CREATE INDEX IF NOT EXISTS ag_events_by_request ON ag_events (request_id, seq)",
    """CREATE TABLE IF NOT EXISTS ag_sessions (
        id_sha256     text PRIMARY KEY,
        credential_id text NOT NULL,
        csrf_token    text NOT NULL,
        created_at    bigint NOT NULL,
        expires_at    bigint NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ag_approvals (
        request_id  text NOT NULL,
        reviewer_id text NOT NULL,
        name        text NOT NULL,
        at          bigint NOT NULL,
        PRIMARY KEY (request_id, name))""",
    """CREATE TABLE IF NOT EXISTS ag_audit (
        seq        bigserial PRIMARY KEY,
        at         bigint NOT NULL,
        actor      text NOT NULL,
        source     text NOT NULL,
        action     text NOT NULL,
        request_id text,
        detail     text NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ag_audit_by_request ON ag_audit (request_id, seq)",
    "CREATE INDEX IF NOT EXISTS ag_audit_by_time ON ag_audit (at)",
    # Columns added since schema 1: a database made before them gets them on open
    # (under the schema lock, so two instances never race to add one).
    "ALTER TABLE ag_credentials ADD COLUMN IF NOT EXISTS roles text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS requested_by text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS approvals_required integer",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS approval_list text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS decided_by_name text",
    """CREATE TABLE IF NOT EXISTS ag_webhook_outbox (
        id              text PRIMARY KEY,
        seq             bigint NOT NULL,
        event_type      text NOT NULL,
        request_id      text NOT NULL,
        target_url      text NOT NULL,
        body_format     text NOT NULL,
        payload         text NOT NULL,
        created_at      bigint NOT NULL,
        state           text NOT NULL,
        attempts        integer NOT NULL DEFAULT 0,
        next_attempt_at bigint,
        last_result     text,
        delivered_at    bigint,
        lease_owner     text,
        lease_until     bigint NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS ag_webhook_outbox_due "
    "ON ag_webhook_outbox (state, next_attempt_at)",
    """CREATE TABLE IF NOT EXISTS ag_webhook_attempts (
        outbox_id       text NOT NULL,
        attempt         integer NOT NULL,
        at              bigint NOT NULL,
        status_code     integer,
        error           text,
        next_attempt_at bigint,
        PRIMARY KEY (outbox_id, attempt))""",
    "INSERT INTO ag_meta (key, value) VALUES ('schema_version', '1') ON CONFLICT DO NOTHING",
)


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """A query in the stores' shared dialect (SQLite's) as PostgreSQL's: ``%s``, ``ag_`` tables."""
    return _TABLE_WORD.sub(r"ag_\1", sql.replace("%", "%%").replace("?", "%s"))


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
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))


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
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in (*_SCHEMA, *email_tables.POSTGRES):
                conn.execute(statement)
            for statement in _SLACK_SCHEMA:
                conn.execute(statement)
            schema = str(conn.execute("SELECT current_schema()").fetchone()[0])
        # One channel per schema: two deployments on one database never hear each other.
        self._channel = f"ag_changes_{schema}"[:63]
        self._feed = ChangeFeed(self._read_seq(), reads_ahead=True)
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
        with self._connection() as conn:
            tx = _PGTx(conn)
            with conn.transaction():
                yield tx
                self._before_commit(tx, tx.events)
                if tx.changed:
                    ids = tuple(dict.fromkeys(tx.changed))
                    for payload in payloads(self._instance, tx.seq, ids):
                        conn.execute("SELECT pg_notify(%s, %s)", (self._channel, payload))
        # Committed: only now may anyone hear of it.
        if tx.changed:
            self._feed.changed(tx.seq, ids)

    def close(self) -> None:
        """Wake every waiter, stop listening and close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._listener.close()
        close_idle(self._idle)
        self.wake_all()
