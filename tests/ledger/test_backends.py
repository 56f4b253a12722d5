"""What only the durable ledgers do: open files and servers, lose connections, keep secrets."""

from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import threading
import traceback
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from approval_guard._ledger.postgres import redact_dsn
from approval_guard._ledger.protocol import FINISHED, STARTED
from approval_guard._ledger.sqlite import SQLiteLedger
from approval_guard.exceptions import ConfigurationError, LedgerError

if TYPE_CHECKING:
    from tests.support.ledger import Backend


# -- redacting a DSN (pure) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "dsn"),
    [
        ("postgresql://app:***@db:5432/agents", "postgresql://app:s3cret@db:5432/agents"),
        ("postgres://app:***@db/agents", "postgres://app:p%40ss:w0rd@db/agents"),
        ("postgresql://app@db/agents", "postgresql://app@db/agents"),
        (
            "postgresql://db/agents?password=***&sslmode=require",
            "postgresql://db/agents?password=s3cret&sslmode=require",
        ),
        ("postgresql://a:***@h1:5432,h2:5432/x", "postgresql://a:s3cret@h1:5432,h2:5432/x"),
        (
            "host=db user=app password=*** dbname=agents",
            "host=db user=app password=s3cret dbname=agents",
        ),
        ("host=db password=*** dbname=agents", "host=db password='s 3 cret' dbname=agents"),
        ("host=db PASSWORD = *** dbname=x", "host=db PASSWORD = s3cret dbname=x"),
        ("host=db dbname=agents", "host=db dbname=agents"),
    ],
)
def test_redact_dsn_replaces_any_password(expected: str, dsn: str) -> None:
    """redact_dsn hides the password in URL and key=value DSNs and keeps the rest."""
    assert expected == redact_dsn(dsn)


# -- PostgresLedger: configuration ------------------------------------------------------


def test_postgres_ledger_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without psycopg, making a PostgresLedger says which extra to install."""
    from approval_guard._ledger.postgres import PostgresLedger

    monkeypatch.setitem(sys.modules, "psycopg", None)

    with pytest.raises(ImportError, match=r"approval-guard\[postgres\]"):
        PostgresLedger("postgresql://app:s3cret@db/agents")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"table": "Robert'); DROP TABLE students;--"}, "table must be"),
        ({"table": "a.b.c"}, "table must be"),
        ({"table": ""}, "table must be"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"connect_timeout": float("nan")}, "connect_timeout"),
    ],
)
def test_postgres_ledger_rejects_bad_options(kwargs: dict[str, Any], match: str) -> None:
    """A bad table name or timeout raises ConfigurationError when the ledger is made."""
    pytest.importorskip("psycopg")
    from approval_guard._ledger.postgres import PostgresLedger

    with pytest.raises(ConfigurationError, match=match):
        PostgresLedger("postgresql://app:s3cret@db/agents", **kwargs)


def test_malformed_dsn_error_does_not_quote_the_dsn() -> None:
    """A DSN that cannot be parsed is refused without echoing any of it."""
    pytest.importorskip("psycopg")
    from approval_guard._ledger.postgres import PostgresLedger

    secret = uuid.uuid4().hex  # not a literal: tracebacks quote source lines
    dsn = f"host=db password={secret} junk"

    with pytest.raises(ConfigurationError) as info:
        PostgresLedger(dsn)

    assert secret not in "".join(traceback.format_exception(info.value))
    assert "junk" not in str(info.value)


def test_unreachable_server_raises_ledger_error_without_the_password() -> None:
    """Claiming against a server that is not there raises LedgerError, password withheld."""
    pytest.importorskip("psycopg")
    from approval_guard._ledger.postgres import PostgresLedger

    secret = uuid.uuid4().hex  # not a literal: tracebacks quote source lines
    ledger = PostgresLedger(f"postgresql://app:{secret}@127.0.0.1:1/agents", connect_timeout=2)

    with pytest.raises(LedgerError) as info:
        ledger.claim("req-1", tool="t", worker="w")

    shown = "".join(traceback.format_exception(info.value)) + repr(ledger)
    assert secret not in shown
    assert "app:***@127.0.0.1:1" in str(info.value)


# -- PostgresLedger: against a server ---------------------------------------------------


def _terminate(backend: Backend) -> None:
    """Kill the ledger's server session, as a restart or a network cut would."""
    import psycopg

    conn = backend.ledger._held.held  # type: ignore[attr-defined]
    assert conn is not None
    with psycopg.connect(backend.spec["dsn"], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))


@pytest.mark.postgres
def test_lost_connection_while_claiming_is_not_a_claim_and_the_next_call_reconnects(
    pg_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """A claim on a dead connection raises LedgerError; the next claim reconnects and wins."""
    ledger = pg_backend.ledger
    ledger.get("warm-up")
    _terminate(pg_backend)

    with pytest.raises(LedgerError):
        ledger.claim("req-1", tool="t", worker="w")

    assert True is ledger.claim("req-1", tool="t", worker="w")
    assert "reconnects" in caplog.text
    assert pg_backend.secret and pg_backend.secret not in caplog.text


@pytest.mark.postgres
def test_lost_connection_after_the_claim_leaves_started(pg_backend: Backend) -> None:
    """A connection lost between claim and finish leaves 'started': counted as run."""
    ledger = pg_backend.ledger
    assert ledger.claim("req-1", tool="t", worker="w")
    _terminate(pg_backend)

    with pytest.raises(LedgerError):
        ledger.finish("req-1")

    row = pg_backend.reopen().get("req-1")
    assert row is not None and row.state == STARTED
    assert False is ledger.claim("req-1", tool="t", worker="w2")
    ledger.finish("req-1")
    row = ledger.get("req-1")
    assert row is not None and row.state == FINISHED


@pytest.mark.postgres
def test_first_use_from_many_workers_at_once_creates_the_table_once(pg_dsn: str) -> None:
    """Eight ledgers creating the same missing table at once all succeed; one claim wins."""
    import psycopg

    from approval_guard._ledger.postgres import PostgresLedger

    table = f"ag_test_{uuid.uuid4().hex[:16]}"
    ledgers = [PostgresLedger(pg_dsn, table=table) for _ in range(8)]
    barrier = threading.Barrier(len(ledgers))
    results: list[Any] = []

    def claim(ledger: PostgresLedger) -> None:
        barrier.wait(timeout=30)
        try:
            results.append(ledger.claim("req-1", tool="t", worker="w"))
        except LedgerError as exc:
            results.append(exc)

    threads = [threading.Thread(target=claim, args=(ledger,)) for ledger in ledgers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(results, key=str) == [False] * 7 + [True]
    finally:
        for ledger in ledgers:
            ledger.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.mark.postgres
def test_ledger_errors_never_show_the_password(pg_backend: Backend) -> None:
    """A server-side error message and its traceback carry no password."""
    assert pg_backend.secret, "the test server's DSN should have a password"
    pg_backend.ledger.get("warm-up")
    assert pg_backend.sabotage is not None
    pg_backend.sabotage()

    with pytest.raises(LedgerError) as info:
        pg_backend.ledger.claim("req-1", tool="t", worker="w")

    assert pg_backend.secret not in "".join(traceback.format_exception(info.value))


# -- SQLiteLedger -----------------------------------------------------------------------


def test_sqlite_ledger_that_cannot_open_its_file_raises_ledger_error(tmp_path: Path) -> None:
    """A path in a missing directory raises LedgerError when the ledger is made."""
    with pytest.raises(LedgerError, match="cannot open"):
        SQLiteLedger(tmp_path / "missing" / "ledger.sqlite3")


def test_sqlite_ledger_on_a_file_that_is_not_a_database_raises_ledger_error(
    tmp_path: Path,
) -> None:
    """A file that is not SQLite raises LedgerError, not sqlite3.DatabaseError."""
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not a database" * 200)

    with pytest.raises(LedgerError):
        SQLiteLedger(path)


def test_sqlite_ledger_uses_wal_and_creates_its_table(tmp_path: Path) -> None:
    """A new SQLite ledger file is in WAL mode and has the executions table."""
    path = tmp_path / "ledger.sqlite3"
    SQLiteLedger(path).close()

    with sqlite3.connect(path) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(executions)")]

    assert mode == "wal"
    expected = [
        "request_id",
        "tool",
        "state",
        "worker",
        "started_at",
        "ended_at",
        "error",
        "arguments_digest",
    ]
    assert expected == columns


def test_sqlite_ledger_repr_shows_the_path(tmp_path: Path) -> None:
    """repr() of a SQLite ledger shows its file."""
    path = tmp_path / "ledger.sqlite3"

    assert f"SQLiteLedger({str(path)!r})" == repr(SQLiteLedger(path))


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX only")
def test_a_forked_child_opens_its_own_connection(shared_backend: Backend) -> None:
    """A ledger used before fork works in the child and still works in the parent."""
    ledger = shared_backend.ledger
    ledger.claim("req-parent", tool="t", worker="parent")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()

    def child() -> None:
        queue.put(ledger.claim("req-child", tool="t", worker="child"))

    process = context.Process(target=child)
    process.start()
    process.join(timeout=30)

    assert (process.exitcode, queue.get(timeout=5)) == (0, True)
    assert False is ledger.claim("req-child", tool="t", worker="parent")
    row = ledger.get("req-child")
    assert row is not None and row.worker == "child"
