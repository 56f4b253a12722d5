"""The execution record in PostgreSQL: at most once across every worker of a fleet.

Needs psycopg 3, the optional extra ``approval-guard[postgres]``; it is imported
when a :class:`PostgresLedger` is made, so ``import approval_guard`` works
without it.

The table (``approval_guard_executions`` unless told otherwise)::

    CREATE TABLE approval_guard_executions (
        request_id text PRIMARY KEY,
        tool       text NOT NULL,
        state      text NOT NULL CHECK (state IN ('started', 'finished', 'failed')),
        worker     text NOT NULL,
        started_at timestamptz NOT NULL,
        ended_at   timestamptz,
        error      text,
        arguments_digest text
    );
    CREATE INDEX approval_guard_executions_started_at ON approval_guard_executions (started_at);

It is created on first use when missing; a database administrator may create
it beforehand instead, and then the ledger needs only SELECT, INSERT, UPDATE and
DELETE on it. A table made by an earlier version, without ``arguments_digest``,
gains the column on first use (that one time the role needs to own the table;
or the administrator runs ``ALTER TABLE ... ADD COLUMN IF NOT EXISTS
arguments_digest text`` first).
"""

from __future__ import annotations

import logging
import math
import re
import urllib.parse
from datetime import timedelta, timezone
from typing import TYPE_CHECKING, Any

from approval_guard._ledger.connection import ProcessConnection
from approval_guard._ledger.protocol import STARTED, Execution, check_digest
from approval_guard.exceptions import ConfigurationError, LedgerError

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

__all__ = ["PostgresLedger", "redact_dsn"]

log = logging.getLogger("approval_guard")

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)", re.IGNORECASE)
_REDACTED = "***"

# Defaults for a fleet, used only when the DSN does not set them: notice a peer
# that vanished (a partition, a dead load balancer) in tens of seconds, not in
# the kernel's default quarter of an hour.
_NETWORK_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}


def redact_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***``; URL and ``key=value`` forms.

    >>> redact_dsn("postgresql://app:s3cret@db:5432/agents")
    'postgresql://app:***@db:5432/agents'
    >>> redact_dsn("host=db user=app password='s 3cret' dbname=agents")
    'host=db user=app password=*** dbname=agents'
    """
    if re.match(r"postgres(?:ql)?://", dsn, re.IGNORECASE):
        parts = urllib.parse.urlsplit(dsn)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, hosts = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":" + _REDACTED
            netloc = f"{userinfo}@{hosts}"
        query = "&".join(
            f"{key}={_REDACTED}" if key.lower() == "password" else f"{key}={value}"
            for key, value in (
                pair.split("=", 1) if "=" in pair else (pair, "")
                for pair in parts.query.split("&")
                if pair
            )
        )
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))
    return _KV_PASSWORD.sub(lambda m: m.group(1) + _REDACTED, dsn)


class PostgresLedger:
    """An execution record in PostgreSQL, shared by every worker that uses one DSN and table.

    A claim is one ``INSERT ... ON CONFLICT (request_id) DO NOTHING RETURNING``
    in autocommit against the primary key: of any number of workers claiming
    one request id at once, on any number of hosts, exactly one wins. The claim
    is committed before the tool starts.

    Failures keep the guarantee "at most once": losing the connection while
    claiming raises :class:`~approval_guard.exceptions.LedgerError`, so the tool
    does not run (if the server had committed the claim, the request stays
    ``started`` and counts as run); losing it after the claim leaves ``started``
    too. The next operation after a lost connection reconnects.

    The DSN may hold a password; it never appears in a repr, a log line or an
    exception message. libpq's ``PGPASSWORD`` and ``~/.pgpass`` work too, and
    keep the password out of the DSN altogether.

    ::

        ledger = ag.PostgresLedger("postgresql://agent@db.internal:5432/agents?sslmode=verify-full")
        guard = ag.Guard(..., ledger=ledger)

    Thread safe: one connection per ledger, used under a lock. Fork safe: a
    child process opens its own connection.

    Args:
        dsn: The PostgreSQL connection string (``postgresql://...`` or ``key=value`` form).
        table: The table that holds the rows (made if missing).
        connect_timeout: Seconds to wait for a connection.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "approval_guard_executions",
        connect_timeout: float = 5,
    ) -> None:
        try:
            import psycopg
            from psycopg import conninfo, sql
        except ImportError as exc:
            raise ImportError(
                "PostgresLedger needs psycopg 3: pip install 'approval-guard[postgres]'"
            ) from exc
        if not isinstance(dsn, str):
            raise ConfigurationError(f"dsn must be a str, not {type(dsn).__name__}")
        try:
            params = conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            # The parser's message quotes pieces of the DSN, which may be the password.
            raise ConfigurationError(
                "PostgresLedger: malformed DSN (details withheld: it may hold a password); "
                "expected 'postgresql://user@host:5432/dbname' or 'host=... dbname=...'"
            ) from None
        parts = table.split(".")
        if not 1 <= len(parts) <= 2 or not all(_NAME.fullmatch(p) for p in parts):
            raise ConfigurationError(
                f"table must be a lower-case SQL name such as 'approval_guard_executions' "
                f"or 'schema.table', not {table!r}"
            )
        if isinstance(connect_timeout, bool) or not (
            isinstance(connect_timeout, (int, float))
            and math.isfinite(connect_timeout)
            and connect_timeout > 0
        ):
            raise ConfigurationError(
                f"connect_timeout must be a positive number of seconds, not {connect_timeout!r}"
            )

        self._psycopg = psycopg
        self._dsn = dsn
        self._password = str(params.get("password") or "")
        self._shown = redact_dsn(dsn)
        self._table_name = table
        self._connect_kwargs: dict[str, Any] = {
            key: value for key, value in _NETWORK_DEFAULTS.items() if key not in params
        }
        # libpq counts whole seconds.
        self._connect_kwargs["connect_timeout"] = max(1, math.ceil(connect_timeout))

        self._table = sql.Identifier(*parts)
        index = sql.Identifier(f"{parts[-1]}_started_at")
        regclass = sql.Literal(".".join(f'"{p}"' for p in parts))
        # Whether the table exists, and whether it has the column later versions added.
        self._sql_exists = sql.SQL(
            "SELECT to_regclass({r}), EXISTS (SELECT 1 FROM pg_attribute"
            " WHERE attrelid = to_regclass({r}) AND attname = 'arguments_digest'"
            " AND NOT attisdropped)"
        ).format(r=regclass)
        self._sql_create = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {t} ("
            " request_id text PRIMARY KEY,"
            " tool text NOT NULL,"
            " state text NOT NULL CHECK (state IN ('started', 'finished', 'failed')),"
            " worker text NOT NULL,"
            " started_at timestamptz NOT NULL,"
            " ended_at timestamptz,"
            " error text,"
            " arguments_digest text)"
        ).format(t=self._table)
        self._sql_add_digest = sql.SQL(
            "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS arguments_digest text"
        ).format(t=self._table)
        self._sql_index = sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (started_at)").format(
            i=index, t=self._table
        )
        cols = sql.SQL(
            "request_id, tool, state, worker, started_at, ended_at, error, arguments_digest"
        )
        self._sql_claim = sql.SQL(
            "INSERT INTO {t} (request_id, tool, state, worker, started_at, arguments_digest)"
            " VALUES (%s, %s, %s, %s, now(), %s)"
            " ON CONFLICT (request_id) DO NOTHING RETURNING request_id"
        ).format(t=self._table)
        self._sql_end = sql.SQL(
            "UPDATE {t} SET state = %s, ended_at = now(), error = %s"
            " WHERE request_id = %s AND state = %s"
        ).format(t=self._table)
        self._sql_release = sql.SQL("DELETE FROM {t} WHERE request_id = %s AND state = %s").format(
            t=self._table
        )
        self._sql_get = sql.SQL("SELECT {c} FROM {t} WHERE request_id = %s").format(
            c=cols, t=self._table
        )
        self._sql_recent = sql.SQL(
            "SELECT {c} FROM {t} ORDER BY started_at DESC, request_id LIMIT %s"
        ).format(c=cols, t=self._table)
        # The server's clock, not each worker's, so that skewed hosts prune alike.
        self._sql_prune = sql.SQL(
            "DELETE FROM {t} WHERE COALESCE(ended_at, started_at) < now() - %s"
        ).format(t=self._table)

        self._table_ready = False
        self._held: ProcessConnection[psycopg.Connection[Any]] = ProcessConnection(
            self._open, usable=lambda conn: not conn.closed and not conn.broken
        )

    @property
    def table(self) -> str:
        """The table that holds the record."""
        return self._table_name

    def __repr__(self) -> str:
        return f"PostgresLedger({self._shown!r}, table={self._table_name!r})"

    def close(self) -> None:
        """Close the connection; the next operation opens a new one."""
        self._held.close()

    # -- connection ---------------------------------------------------------------------

    def _error(self, what: str, exc: BaseException) -> LedgerError:
        """A LedgerError whose message, and cause, cannot carry the password.

        Raise it as ``raise error from error.__cause__``.
        """
        text = f"{type(exc).__name__}: {exc}".strip()
        secret = self._password
        leaked = self._dsn in text or (bool(secret) and secret in text)
        text = text.replace(self._dsn, self._shown)
        if secret:
            text = text.replace(secret, _REDACTED)
        error = LedgerError(f"PostgreSQL ledger {self._shown}: {what} failed: {text}")
        # Keep the driver's exception for its traceback, unless it could show the password.
        error.__cause__ = None if leaked else exc
        return error

    def _open(self) -> psycopg.Connection[Any]:
        # Called by self._held.get(), under its lock.
        try:
            # prepare_threshold=None: no server-side prepared statements, which a pooler in
            # transaction mode (PgBouncer) would send to the wrong backend.
            conn = self._psycopg.connect(
                self._dsn, autocommit=True, prepare_threshold=None, **self._connect_kwargs
            )
        except self._psycopg.Error as exc:
            error = self._error("connect", exc)
            raise error from error.__cause__
        what = "create table"
        try:
            if not self._table_ready:
                table, current = conn.execute(self._sql_exists).fetchone() or (None, False)
                if table is not None and not current:
                    what = (
                        f"add column arguments_digest (the table's owner can run: ALTER TABLE "
                        f"{self._table_name} ADD COLUMN IF NOT EXISTS arguments_digest text)"
                    )
                # Up to date: no DDL, so a role with only DML privileges is enough.
                if not current:
                    self._create_table(conn)
        except self._psycopg.Error as exc:
            conn.close()
            error = self._error(what, exc)
            raise error from error.__cause__
        self._table_ready = True
        return conn

    def _create_table(self, conn: psycopg.Connection[Any]) -> None:
        """Create the table, or give one made by an earlier version its new column."""
        # CREATE TABLE IF NOT EXISTS alone can still fail when two workers run it at the
        # same moment (a unique violation in the catalogue); serialise first use per table.
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._table_name,))
            conn.execute(self._sql_create)
            conn.execute(self._sql_add_digest)
            conn.execute(self._sql_index)

    def _run(
        self, what: str, query: sql.Composed, params: tuple[object, ...]
    ) -> tuple[int, list[tuple[Any, ...]]]:
        with self._held.lock:
            conn = self._held.get()
            try:
                cursor = conn.execute(query, params)
                rows = cursor.fetchall() if cursor.description is not None else []
                return cursor.rowcount, rows
            except self._psycopg.Error as exc:
                error = self._error(what, exc)
                if conn.closed or conn.broken or isinstance(exc, self._psycopg.OperationalError):
                    log.warning("%s; the next operation reconnects", error)
                    self._held.drop()
                raise error from error.__cause__

    # -- the Ledger protocol ------------------------------------------------------------

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won.

        ``arguments_digest`` (None, or 64 lowercase hex characters) is stored with the row.
        Raises LedgerError when the answer is unknown (a lost connection): not claimed.

        Args:
            request_id: The approval request's id (one row per approved request).
            tool: The tool's name, kept with the row.
            worker: Who runs the call (host and process), kept with the row.
            arguments_digest: Lowercase hex SHA-256 of the canonical JSON of the arguments that run,
                or None; anything else is ValueError before anything is written.
        """
        digest = check_digest(arguments_digest)
        _, rows = self._run("claim", self._sql_claim, (request_id, tool, STARTED, worker, digest))
        return len(rows) == 1

    def finish(self, request_id: str) -> None:
        """Mark a claimed call as ``finished``.

        Args:
            request_id: The claimed request's id.
        """
        self._run("finish", self._sql_end, ("finished", None, request_id, STARTED))

    def fail(self, request_id: str, error: str) -> None:
        """Mark a claimed call as ``failed`` (it ran and raised; it still counts as run).

        Args:
            request_id: The claimed request's id.
            error: What the tool raised (kept, cut to 1,000 characters).
        """
        self._run("fail", self._sql_end, ("failed", error, request_id, STARTED))

    def release(self, request_id: str) -> None:
        """Give back a claim whose call never started; a finished or failed row stays.

        Args:
            request_id: The claimed request's id.
        """
        self._run("release", self._sql_release, (request_id, STARTED))

    def get(self, request_id: str) -> Execution | None:
        """The row for ``request_id``, or None.

        Args:
            request_id: The request's id.
        """
        _, rows = self._run("get", self._sql_get, (request_id,))
        return _execution(rows[0]) if rows else None

    def recent(self, limit: int = 50) -> list[Execution]:
        """The newest rows first.

        Args:
            limit: How many rows at most.
        """
        _, rows = self._run("recent", self._sql_recent, (limit,))
        return [_execution(row) for row in rows]

    def prune(self, older_than: timedelta) -> int:
        """Delete rows that ended (or started) more than ``older_than`` ago; return the count.

        Args:
            older_than: How long ago a row must have ended (or started) to go.
        """
        count, _ = self._run("prune", self._sql_prune, (older_than,))
        return count


def _execution(row: tuple[Any, ...]) -> Execution:
    request_id, tool, state, worker, started_at, ended_at, error, arguments_digest = row
    # psycopg returns the session's time zone; the record speaks UTC, like the other ledgers.
    return Execution(
        request_id=request_id,
        tool=tool,
        state=state,
        worker=worker,
        started_at=started_at.astimezone(timezone.utc),
        ended_at=None if ended_at is None else ended_at.astimezone(timezone.utc),
        error=error,
        arguments_digest=arguments_digest,
    )
