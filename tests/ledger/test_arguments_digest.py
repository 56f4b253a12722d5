"""``arguments_digest``: each row says which arguments ran, and old records keep working."""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import approval_guard as ag
from approval_guard._ledger.memory import MemoryLedger
from approval_guard._ledger.protocol import FINISHED, STARTED, Execution, claim_accepts_digest
from approval_guard._ledger.scoped import ProviderLedger
from approval_guard._ledger.sqlite import SQLiteLedger
from approval_guard.cli import _ledger as cli_ledger
from approval_guard.exceptions import LedgerError
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard, refund_tool
from tests.support.ledger import run

if TYPE_CHECKING:
    from tests.support.ledger import Backend, Workers

DIGEST = hashlib.sha256(b'{"amount":4900,"payment_id":"payment_123"}').hexdigest()
OTHER = hashlib.sha256(b'{"amount":1,"payment_id":"payment_123"}').hexdigest()
PROVIDER = "http://127.0.0.1:8765"

# The schema of the previous version, as its files and tables are in the field.
OLD_SQLITE_SCHEMA = """
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
OLD_PG_SCHEMA = """
CREATE TABLE {t} (
    request_id text PRIMARY KEY,
    tool       text NOT NULL,
    state      text NOT NULL CHECK (state IN ('started', 'finished', 'failed')),
    worker     text NOT NULL,
    started_at timestamptz NOT NULL,
    ended_at   timestamptz,
    error      text
);
CREATE INDEX {t}_started_at ON {t} (started_at);
"""
OLD_ROW = (
    "req-old",
    "issue_refund",
    "finished",
    "host-a:1",
    "2024-01-02T03:04:05.000006+00:00",
    "2024-01-02T03:04:06.000000+00:00",
    None,
)

BAD_DIGESTS = [
    pytest.param(DIGEST.upper(), id="uppercase"),
    pytest.param(DIGEST[:-1], id="63-chars"),
    pytest.param(DIGEST + "0", id="65-chars"),
    pytest.param("g" + DIGEST[1:], id="not-hex"),
    pytest.param(DIGEST + "\n", id="trailing-newline"),
    pytest.param("sha256:" + DIGEST[7:], id="prefixed"),
    pytest.param("", id="empty"),
    pytest.param(DIGEST.encode(), id="bytes"),
    pytest.param(12345, id="int"),
]


class OldLedger(MemoryLedger):
    """A user's ledger written against the protocol before digests existed."""

    def __repr__(self) -> str:
        return "OldLedger(dsn='postgresql://app:hunter2@db/x')"

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:  # type: ignore[override]
        return super().claim(request_id, tool=tool, worker=worker)


# -- every backend ----------------------------------------------------------------------


def test_claim_stores_the_digest_and_get_and_recent_return_it(backend: Backend) -> None:
    """The digest given to claim comes back from get, recent and a reopened record."""
    ledger = backend.ledger

    assert ledger.claim("req-1", tool="issue_refund", worker="w", arguments_digest=DIGEST)
    ledger.finish("req-1")

    row = ledger.get("req-1")
    assert row is not None
    assert (DIGEST, FINISHED) == (row.arguments_digest, row.state)
    assert [DIGEST] == [r.arguments_digest for r in ledger.recent()]
    reopened = backend.reopen().get("req-1")
    assert reopened is not None and DIGEST == reopened.arguments_digest


def test_a_claim_without_a_digest_stores_none(backend: Backend) -> None:
    """A claim without a digest, as before, leaves the row's digest None."""
    assert backend.ledger.claim("req-1", tool="issue_refund", worker="w")

    row = backend.ledger.get("req-1")
    assert row is not None and row.arguments_digest is None and STARTED == row.state


def test_a_losing_claim_does_not_replace_the_winners_digest(backend: Backend) -> None:
    """The second claimer of a request id loses and the row keeps the first digest."""
    ledger = backend.ledger
    assert ledger.claim("req-1", tool="issue_refund", worker="a", arguments_digest=DIGEST)

    assert not ledger.claim("req-1", tool="issue_refund", worker="b", arguments_digest=OTHER)

    row = ledger.get("req-1")
    assert row is not None and (DIGEST, "a") == (row.arguments_digest, row.worker)


def test_the_digest_survives_a_failed_call(backend: Backend) -> None:
    """Marking a claim failed keeps its digest."""
    backend.ledger.claim("req-1", tool="issue_refund", worker="w", arguments_digest=DIGEST)
    backend.ledger.fail("req-1", "boom")

    row = backend.ledger.get("req-1")
    assert row is not None and (DIGEST, "boom") == (row.arguments_digest, row.error)


@pytest.mark.parametrize("bad", BAD_DIGESTS)
def test_a_malformed_digest_is_refused_and_nothing_is_written(backend: Backend, bad: Any) -> None:
    """Anything but None or 64 lowercase hex characters is a ValueError, and no row appears."""
    with pytest.raises(ValueError, match="arguments_digest must be a SHA-256"):
        backend.ledger.claim("req-1", tool="issue_refund", worker="w", arguments_digest=bad)

    assert backend.ledger.get("req-1") is None
    assert backend.ledger.claim("req-1", tool="issue_refund", worker="w")


def test_the_provider_view_passes_the_digest_through(backend: Backend) -> None:
    """Through ProviderLedger the digest reaches the underlying row and comes back."""
    view = ProviderLedger(backend.ledger, PROVIDER)

    assert view.claim("7", tool="issue_refund", worker="w", arguments_digest=DIGEST)

    own = view.get("7")
    underlying = backend.ledger.get(view.key("7"))
    assert own is not None and underlying is not None
    assert (DIGEST, DIGEST) == (own.arguments_digest, underlying.arguments_digest)
    assert [DIGEST] == [r.arguments_digest for r in view.recent()]


# -- ledgers written against the old protocol -------------------------------------------


def test_claim_accepts_digest_for_every_ledger_of_this_package(tmp_path: Path) -> None:
    """The package's own ledgers and the provider view all take a digest."""
    sqlite = SQLiteLedger(tmp_path / "l.sqlite3")
    ledgers: list[object] = [MemoryLedger(), sqlite, ProviderLedger(MemoryLedger(), PROVIDER)]
    try:
        from approval_guard._ledger.postgres import PostgresLedger
    except ImportError:  # without the postgres extra
        pass
    else:
        ledgers.append(PostgresLedger("postgresql://app@127.0.0.1:1/x"))  # connects lazily

    assert [True] * len(ledgers) == [claim_accepts_digest(ledger) for ledger in ledgers]
    sqlite.close()


class _Kwargs:
    def claim(self, request_id: str, **options: Any) -> bool:
        return True


class _PositionalOnly:
    def claim(self, request_id: str, arguments_digest: str | None = None, /) -> bool:
        return True


class _Unreadable:
    def __init__(self) -> None:
        def claim(*args: Any, **kwargs: Any) -> bool:
            return True

        claim.__signature__ = "not a signature"  # type: ignore[attr-defined]
        self.claim = claim


@pytest.mark.parametrize(
    ("expected", "ledger"),
    [
        (False, OldLedger()),
        (True, _Kwargs()),
        (False, _PositionalOnly()),
        (False, _Unreadable()),
        (False, object()),
    ],
    ids=["old-protocol", "kwargs", "positional-only", "unreadable-signature", "no-claim"],
)
def test_claim_accepts_digest_reads_the_claim_signature(expected: bool, ledger: object) -> None:
    """True for an arguments_digest keyword or **kwargs; False otherwise or when unreadable."""
    assert expected == claim_accepts_digest(ledger)


def test_a_guard_refuses_a_ledger_whose_claim_takes_no_digest() -> None:
    """A ledger written before digests is refused when the Guard is made, naming the type only."""
    with pytest.raises(ag.ConfigurationError, match="arguments_digest") as raised:
        ag.Guard(
            base_url="https://approvals.example.com",
            credential="x",
            ledger=OldLedger(),  # type: ignore[arg-type]
        )

    assert "OldLedger" in str(raised.value)
    assert "hunter2" not in str(raised.value)


class _AsyncClaim(MemoryLedger):
    """A ledger written for asyncio: its claim returns a coroutine, which is always truthy."""

    async def claim(  # type: ignore[override]
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        return super().claim(
            request_id, tool=tool, worker=worker, arguments_digest=arguments_digest
        )


class _ExtraRequired(MemoryLedger):
    """A claim that takes arguments_digest, but also needs an argument the guard never gives."""

    def claim(  # type: ignore[override]
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None, ttl: int
    ) -> bool:
        return super().claim(
            request_id, tool=tool, worker=worker, arguments_digest=arguments_digest
        )


class _KeywordOnlyId(MemoryLedger):
    """A claim whose request id is keyword-only: the guard passes it by position."""

    def claim(  # type: ignore[override]
        self, *, request_id: str, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        return super().claim(
            request_id, tool=tool, worker=worker, arguments_digest=arguments_digest
        )


@pytest.mark.parametrize(
    "ledger",
    [_AsyncClaim(), _ExtraRequired(), _KeywordOnlyId()],
    ids=["async-claim", "extra-required-argument", "keyword-only-request-id"],
)
def test_a_guard_refuses_a_ledger_whose_claim_it_cannot_call(ledger: MemoryLedger) -> None:
    """A claim the guard cannot call as the protocol says is refused when the Guard is made.

    Accepted, a coroutine claim would be truthy and let every approved call run, again
    and again; the others would fail every approved call.
    """
    assert not claim_accepts_digest(ledger)
    with pytest.raises(ag.ConfigurationError, match="claim"):
        ag.Guard(base_url="https://approvals.example.com", credential="x", ledger=ledger)


def test_a_claim_that_returns_an_awaitable_never_lets_the_tool_run(
    provider: LocalProvider,
) -> None:
    """A sync claim handing back a coroutine has not claimed anything: the tool does not run."""

    class _Deferred(MemoryLedger):
        def claim(  # type: ignore[override]
            self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
        ) -> Any:
            async def later() -> bool:
                return False

            return later()

    ran: list[Any] = []
    tool = refund_tool(make_guard(provider, ledger=_Deferred()), ran)
    provider.policy = approve_after(0.0)
    outs = []
    for _ in range(2):
        with ag.harness_call(idempotency_key="toolcall_deferred", limit="10s"):
            outs.append(tool("p", 1))

    assert [] == ran
    assert all(isinstance(out, ag.NotRun) for out in outs)
    assert [ag.Reason.NOT_OBTAINED] * 2 == [out.reason for out in outs]


# -- SQLite: a file made by the previous version ----------------------------------------


@pytest.fixture
def old_sqlite_file(tmp_path: Path) -> Path:
    """A ledger file as the previous version made it, with one finished row."""
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(OLD_SQLITE_SCHEMA)
        conn.execute("INSERT INTO executions VALUES (?, ?, ?, ?, ?, ?, ?)", OLD_ROW)
        conn.commit()
    finally:
        conn.close()
    return path


def _sqlite_columns(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[1] for row in conn.execute("PRAGMA table_info(executions)")]


def test_an_old_sqlite_file_gains_the_column_and_keeps_its_rows(old_sqlite_file: Path) -> None:
    """Opening an old file adds arguments_digest; its old row reads with no digest."""
    assert "arguments_digest" not in _sqlite_columns(old_sqlite_file)

    ledger = SQLiteLedger(old_sqlite_file)
    old = ledger.get("req-old")
    assert ledger.claim("req-new", tool="delete_user", worker="host-b:2", arguments_digest=DIGEST)
    new = ledger.get("req-new")
    ledger.close()

    assert "arguments_digest" == _sqlite_columns(old_sqlite_file)[-1]
    assert old == Execution(
        request_id="req-old",
        tool="issue_refund",
        state="finished",
        worker="host-a:1",
        started_at=datetime.fromisoformat(OLD_ROW[4]),
        ended_at=datetime.fromisoformat(OLD_ROW[5]),
        error=None,
        arguments_digest=None,
    )
    assert new is not None and DIGEST == new.arguments_digest
    reopened = SQLiteLedger(old_sqlite_file)  # the column is there now: nothing to add
    assert ["req-new", "req-old"] == [r.request_id for r in reopened.recent()]
    reopened.close()


def test_a_previous_version_process_still_claims_in_an_upgraded_file(
    old_sqlite_file: Path,
) -> None:
    """The previous version's INSERT (no digest column) still works after the upgrade."""
    SQLiteLedger(old_sqlite_file).close()
    with sqlite3.connect(old_sqlite_file) as conn:
        conn.execute(
            "INSERT INTO executions (request_id, tool, state, worker, started_at, ended_at, error)"
            " VALUES ('req-v0', 't', 'started', 'w', '2025-01-01T00:00:00.000000+00:00',"
            " NULL, NULL) ON CONFLICT (request_id) DO NOTHING"
        )

    with closing(SQLiteLedger(old_sqlite_file)) as reopened:
        row = reopened.get("req-v0")
    assert row is not None and row.arguments_digest is None


@pytest.mark.slow
def test_processes_opening_an_old_sqlite_file_at_once_all_upgrade_it(
    old_sqlite_file: Path, workers: Workers
) -> None:
    """Twelve processes open one old file at the same instant: none fails on the new column."""
    spec = {
        "mode": "open",
        "ledger": {"kind": "sqlite", "path": str(old_sqlite_file)},
        "request_id": "req-race",
        "digest": DIGEST,
    }

    answers = workers.race([spec] * 12)

    assert 1 == sum(answer["claimed"] for answer in answers)
    ledger = SQLiteLedger(old_sqlite_file)
    row = ledger.get("req-race")
    assert row is not None and DIGEST == row.arguments_digest
    assert 1 == _sqlite_columns(old_sqlite_file).count("arguments_digest")
    ledger.close()


# -- PostgreSQL: a table made by the previous version -----------------------------------


@pytest.fixture
def old_pg_table(pg_dsn: str) -> Iterator[str]:
    """A table as the previous version made it, with one finished row; dropped afterwards."""
    import psycopg

    table = f"ag_old_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for statement in OLD_PG_SCHEMA.format(t=table).split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s, %s)",
            OLD_ROW,
        )
    try:
        yield table
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def _pg_columns(dsn: str, table: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = %s ORDER BY ordinal_position",
            (table,),
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.postgres
def test_postgres_round_trips_the_digest(pg_backend: Backend) -> None:
    """A new PostgreSQL table stores the digest; get and recent return it."""
    ledger = pg_backend.ledger
    assert ledger.claim("req-1", tool="issue_refund", worker="w", arguments_digest=DIGEST)
    assert ledger.claim("req-2", tool="issue_refund", worker="w")

    row = ledger.get("req-1")
    assert row is not None and DIGEST == row.arguments_digest
    assert {"req-1": DIGEST, "req-2": None} == {
        r.request_id: r.arguments_digest for r in ledger.recent()
    }
    assert "arguments_digest" in _pg_columns(pg_backend.spec["dsn"], pg_backend.spec["table"])


@pytest.mark.postgres
def test_an_old_postgres_table_gains_the_column_and_keeps_its_rows(
    pg_dsn: str, old_pg_table: str
) -> None:
    """First use of an old table adds arguments_digest; its old row reads with no digest."""
    from approval_guard._ledger.postgres import PostgresLedger

    assert "arguments_digest" not in _pg_columns(pg_dsn, old_pg_table)
    ledger = PostgresLedger(pg_dsn, table=old_pg_table)

    old = ledger.get("req-old")
    assert ledger.claim("req-new", tool="delete_user", worker="host-b:2", arguments_digest=DIGEST)
    new = ledger.get("req-new")
    ledger.close()

    assert "arguments_digest" == _pg_columns(pg_dsn, old_pg_table)[-1]
    assert old is not None and (None, FINISHED, "host-a:1") == (
        old.arguments_digest,
        old.state,
        old.worker,
    )
    assert datetime.fromisoformat(OLD_ROW[4]) == old.started_at
    assert new is not None and DIGEST == new.arguments_digest
    again = PostgresLedger(pg_dsn, table=old_pg_table)  # up to date now: no DDL
    assert ["req-new", "req-old"] == [r.request_id for r in again.recent()]
    again.close()


@pytest.mark.slow
@pytest.mark.postgres
def test_processes_opening_an_old_postgres_table_at_once_all_upgrade_it(
    pg_dsn: str, old_pg_table: str, workers: Workers
) -> None:
    """Twelve processes first use one old table at the same instant: none fails."""
    spec = {
        "mode": "open",
        "ledger": {"kind": "postgres", "dsn": pg_dsn, "table": old_pg_table},
        "request_id": "req-race",
        "digest": DIGEST,
    }

    answers = workers.race([spec] * 12)

    assert 1 == sum(answer["claimed"] for answer in answers)
    assert 1 == _pg_columns(pg_dsn, old_pg_table).count("arguments_digest")


@pytest.mark.postgres
def test_an_old_postgres_table_a_role_cannot_alter_fails_closed_with_the_fix(
    pg_dsn: str, old_pg_table: str
) -> None:
    """A DML-only role on an old table gets a LedgerError naming the ALTER TABLE to run."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from approval_guard._ledger.postgres import PostgresLedger

    role, password = f"ag_dml_{uuid.uuid4().hex[:12]}", uuid.uuid4().hex
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        try:
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the test DSN's role may not create roles")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {old_pg_table} TO {role}")
    try:
        ledger = PostgresLedger(
            make_conninfo(pg_dsn, user=role, password=password), table=old_pg_table
        )
        with pytest.raises(LedgerError) as raised:
            ledger.claim("req-1", tool="t", worker="w", arguments_digest=DIGEST)
        message = str(raised.value)
        assert f"ALTER TABLE {old_pg_table} ADD COLUMN IF NOT EXISTS arguments_digest" in message
        assert password not in message

        # Once the owner has added the column, the DML-only role needs no DDL.
        with closing(PostgresLedger(pg_dsn, table=old_pg_table)) as owners:
            owners.get("req-old")
        assert ledger.claim("req-1", tool="t", worker="w", arguments_digest=DIGEST)
        ledger.close()
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {old_pg_table}")
            conn.execute(f"DROP ROLE IF EXISTS {role}")


# -- the ledger command -----------------------------------------------------------------


@pytest.fixture
def digest_db(tmp_path: Path) -> Path:
    """A SQLite ledger with one row that has a digest and one that has none."""
    path = tmp_path / "executions.sqlite3"
    ledger = SQLiteLedger(path)
    ledger.claim("req-plain", tool="delete_user", worker="host-b:7")
    ledger.claim("req-digest", tool="issue_refund", worker="host-a:1", arguments_digest=DIGEST)
    ledger.finish("req-digest")
    ledger.close()
    return path


def _show_json(path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    args = argparse.Namespace(
        db=str(path), dsn=None, table="approval_guard_executions", limit=50, json=True
    )
    assert 0 == cli_ledger.cmd_show(args)
    return json.loads(capsys.readouterr().out)


def test_show_prints_the_first_12_hex_characters_of_each_digest(
    digest_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table's ARGS column shows sha256: and 12 hex characters, or - for no digest."""
    assert 0 == run(["ledger", "show", "--db", str(digest_db)])

    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["REQUEST"].split()[-1] == "ARGS"
    assert f"sha256:{DIGEST[:12]}" == lines["req-digest"].split()[-1]
    assert "-" == lines["req-plain"].split()[-1]
    assert DIGEST[:13] not in out


def test_show_json_gives_every_field_with_the_full_digest(
    digest_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show --json prints each row's fields, arguments_digest in full, None as null."""
    rows = _show_json(digest_db, capsys)

    by_id = {row["request_id"]: row for row in rows}
    assert {"req-digest": DIGEST, "req-plain": None} == {
        key: row["arguments_digest"] for key, row in by_id.items()
    }
    assert {
        "request_id",
        "tool",
        "state",
        "worker",
        "started_at",
        "ended_at",
        "error",
        "arguments_digest",
    } == set(by_id["req-digest"])
    assert ("issue_refund", "finished", "host-a:1") == (
        by_id["req-digest"]["tool"],
        by_id["req-digest"]["state"],
        by_id["req-digest"]["worker"],
    )
    assert by_id["req-digest"]["started_at"].endswith("Z")
    assert by_id["req-plain"]["ended_at"] is None


def test_show_json_on_an_empty_record_is_an_empty_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show --json on a record with no rows prints [], not prose."""
    path = tmp_path / "empty.sqlite3"
    SQLiteLedger(path).close()

    assert [] == _show_json(path, capsys)


def test_show_on_an_old_file_upgrades_it_and_shows_no_digest(
    old_sqlite_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ledger show reads a previous version's file; its rows have no digest."""
    assert 0 == run(["ledger", "show", "--db", str(old_sqlite_file)])

    row = [line for line in capsys.readouterr().out.splitlines() if "req-old" in line]
    assert 1 == len(row) and "-" == row[0].split()[-1]
    assert [{"request_id": "req-old", "arguments_digest": None}] == [
        {key: r[key] for key in ("request_id", "arguments_digest")}
        for r in _show_json(old_sqlite_file, capsys)
    ]


@pytest.mark.postgres
def test_show_against_postgres_shows_the_digest(
    pg_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dsn shows the short digest in the table and the full one in JSON."""
    pg_backend.ledger.claim("req-pg", tool="t", worker="w", arguments_digest=DIGEST)
    where = {"dsn": pg_backend.spec["dsn"], "table": pg_backend.spec["table"]}

    assert 0 == run(["ledger", "show", "--dsn", where["dsn"], "--table", where["table"]])
    assert f"sha256:{DIGEST[:12]}" in capsys.readouterr().out
    args = argparse.Namespace(db=None, limit=50, json=True, **where)
    assert 0 == cli_ledger.cmd_show(args)
    assert [DIGEST] == [r["arguments_digest"] for r in json.loads(capsys.readouterr().out)]
