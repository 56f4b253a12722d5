"""``approval-guard ledger show|prune``: looking at and trimming the execution record."""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from approval_guard._codec.duration import format_age, parse_age
from approval_guard._ledger.sqlite import SQLiteLedger
from tests.support.ledger import run

if TYPE_CHECKING:
    from tests.support.ledger import Backend


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite ledger with one finished and one started execution."""
    path = tmp_path / "executions.sqlite3"
    ledger = SQLiteLedger(path)
    ledger.claim("req-finished", tool="issue_refund", worker="host-a:101")
    ledger.finish("req-finished")
    ledger.claim("req-started-with-a-long-id", tool="delete_user", worker="host-b:7")
    ledger.close()
    return path


def _backdate(path: Path, request_id: str, age: timedelta) -> None:
    when = (datetime.now(timezone.utc) - age).isoformat(timespec="microseconds")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE executions SET started_at = ?, ended_at = ? WHERE request_id = ?",
            (when, when, request_id),
        )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("90m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
        ("2d3h4m5s", timedelta(days=2, hours=3, minutes=4, seconds=5)),
    ],
)
def test_parse_age_accepts_day_hour_minute_second_units(text: str, expected: timedelta) -> None:
    """Ages are written like 30d, 12h, 1d12h, 90m, 45s."""
    assert parse_age(text) == expected


@pytest.mark.parametrize("text", ["", "30", "d", "1h1d", "0d", "-1d", "30 days", "1.5d"])
def test_parse_age_rejects_anything_else(text: str) -> None:
    """A malformed, zero or negative age is refused."""
    with pytest.raises(ValueError, match="age"):
        parse_age(text)


def test_format_age_writes_what_parse_age_reads() -> None:
    """format_age is the inverse of parse_age."""
    assert [format_age(parse_age(t)) for t in ("30d", "1d12h", "90m")] == ["30d", "1d12h", "1h30m"]


def test_show_lists_recent_executions_as_an_aligned_table(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show prints a header and one aligned line per execution, newest first."""
    assert run(["ledger", "show", "--db", str(db)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "REQUEST",
        "req-started-with-a-long-id",
        "req-finished",
    ]
    words = lines[1].split()  # STARTED is two words; ENDED is "-" while started, ARGS unless given
    assert (words[1], words[2], words[-3], words[-2], words[-1]) == (
        "delete_user",
        "started",
        "-",
        "host-b:7",
        "-",
    )
    for column in ("TOOL", "STATE", "STARTED", "WORKER", "ARGS"):
        start = lines[0].index(column)
        assert all(line[start - 2 : start] == "  " and line[start] != " " for line in lines)


def test_show_honours_the_limit(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--limit caps the number of rows shown."""
    assert run(["ledger", "show", "--db", str(db), "--limit", "1"]) == 0

    assert len(capsys.readouterr().out.splitlines()) == 2


def test_show_on_an_empty_record_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show on a record with no rows says that nothing is recorded."""
    path = tmp_path / "empty.sqlite3"
    SQLiteLedger(path).close()

    assert run(["ledger", "show", "--db", str(path)]) == 0
    assert capsys.readouterr().out.strip() == "no executions recorded"


def test_show_on_a_missing_file_fails_without_creating_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --db path is an error, and no empty database appears there."""
    path = tmp_path / "typo.sqlite3"

    assert run(["ledger", "show", "--db", str(path)]) == 1
    assert "no such ledger file" in capsys.readouterr().err
    assert not path.exists()


def test_prune_deletes_old_rows_and_prints_the_count(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prune deletes rows older than the age, keeps younger ones, and says how many went."""
    _backdate(db, "req-finished", timedelta(days=31))

    assert run(["ledger", "prune", "--db", str(db), "--older-than", "30d"]) == 0

    assert capsys.readouterr().out.strip() == "deleted 1 execution older than 30d"
    with closing(SQLiteLedger(db)) as ledger:
        assert [row.request_id for row in ledger.recent()] == ["req-started-with-a-long-id"]


@pytest.mark.parametrize("age", ["30m", "59m59s"])
def test_prune_refuses_an_age_under_an_hour(
    db: Path, age: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ages under 1h are refused: those rows may guard approvals that are still valid."""
    with pytest.raises(SystemExit) as exit_info:
        run(["ledger", "prune", "--db", str(db), "--older-than", age])

    assert exit_info.value.code == 2
    assert "too young" in capsys.readouterr().err
    with closing(SQLiteLedger(db)) as ledger:
        assert len(ledger.recent()) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "show"],
        ["ledger", "show", "--db", "a.sqlite3", "--dsn", "postgresql://x/y"],
        ["ledger", "prune", "--db", "a.sqlite3"],
        ["ledger", "show", "--db", "a.sqlite3", "--limit", "0"],
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    """Exactly one of --db/--dsn is required, prune needs --older-than, limits are positive."""
    with pytest.raises(SystemExit) as exit_info:
        run(argv)

    assert exit_info.value.code == 2


def test_the_approval_guard_command_has_the_ledger_commands(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`approval-guard ledger show` works through the package's own command line."""
    from approval_guard.cli import main

    assert main(["ledger", "show", "--db", str(db)]) == 0
    assert "req-finished" in capsys.readouterr().out


@pytest.mark.postgres
def test_show_and_prune_against_postgres(
    pg_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dsn reads and prunes a PostgreSQL record and never prints the password."""
    pg_backend.ledger.claim("req-pg", tool="issue_refund", worker="host-c:9")
    where = ["--dsn", pg_backend.spec["dsn"], "--table", pg_backend.spec["table"]]

    assert run(["ledger", "show", *where]) == 0
    assert run(["ledger", "prune", *where, "--older-than", "1d"]) == 0

    captured = capsys.readouterr()
    assert "req-pg" in captured.out
    assert "deleted 0 executions older than 1d" in captured.out
    assert pg_backend.secret and pg_backend.secret not in captured.out + captured.err


def test_show_against_an_unreachable_postgres_fails_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A DSN that cannot be reached is a one-line error, password withheld."""
    pytest.importorskip("psycopg")
    secret = uuid.uuid4().hex

    assert run(["ledger", "show", "--dsn", f"postgresql://app:{secret}@127.0.0.1:1/x"]) == 1

    err = capsys.readouterr().err
    assert "approval-guard: error:" in err
    assert secret not in err
