"""A SQLite writer meeting another process's write lock waits for it, up to the busy timeout.

The writer connection's own busy timeout is 0 (so the event loop can try a
batch without waiting, ``test_at_once.py``); a writer in a worker thread waits
in ``SQLiteTransactions.begin`` instead, as SQLite's busy handler did.
"""

# House style puts the expected value first; ruff's SIM300 wants it last.

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from approval_guard.provider.store import sqlite_group
from approval_guard.provider.store.sqlite_group import is_busy
from tests.support.group_env import GroupEnv


@pytest.fixture
def env(tmp_path: Path) -> Iterator[GroupEnv]:
    made = GroupEnv("sqlite", str(tmp_path / "busy.sqlite3"))
    try:
        yield made
    finally:
        made.store.close()


def _hold_write_lock(path: str, seconds: float) -> threading.Event:
    """Another connection holds the file's write lock for ``seconds``; set once it holds it."""
    holding = threading.Event()

    def hold() -> None:
        other = sqlite3.connect(path, isolation_level=None, timeout=10)
        try:
            other.execute("BEGIN IMMEDIATE")
            holding.set()
            time.sleep(seconds)
            other.execute("ROLLBACK")
        finally:
            other.close()

    threading.Thread(target=hold, daemon=True).start()
    assert holding.wait(10)
    return holding


def test_a_writer_waits_for_another_processes_write_lock_and_then_writes(env: GroupEnv) -> None:
    """The lock held for 0.5 s: the decision waits it out and is kept."""
    (request_id,) = env.new(1)
    _hold_write_lock(env.where, 0.5)
    started = time.monotonic()
    assert "approved" == env.decide(request_id)
    assert 0.3 < time.monotonic() - started < 5
    assert "approved" == env.status(request_id)


def test_a_writer_gives_up_after_the_busy_timeout(
    env: GroupEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held longer than the busy timeout (0.3 s here): "database is locked", nothing written."""
    monkeypatch.setattr(sqlite_group, "BUSY_TIMEOUT_MS", 300)
    (request_id,) = env.new(1)
    _hold_write_lock(env.where, 2.0)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        env.decide(request_id)
    assert 0.25 < time.monotonic() - started < 1.5
    assert not env.store._db.in_transaction
    assert "pending" == env.status(request_id)


def test_busy_errors_are_told_from_others() -> None:
    """A lock held elsewhere is "busy"; a syntax error is not."""
    path = ":memory:"
    db = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.OperationalError) as syntax:
            db.execute("BEGIN SIDEWAYS")
        assert not is_busy(syntax.value)
        assert is_busy(sqlite3.OperationalError("database is locked"))
    finally:
        db.close()


def test_a_file_not_in_wal_mode_keeps_sqlites_busy_wait_and_never_runs_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where WAL cannot be had, readers block COMMIT: the writer waits in SQLite, as before."""
    from approval_guard.provider import Store
    from approval_guard.provider.store.sqlite_db import SQLiteDB

    connect = SQLiteDB._connect

    def without_wal(self: SQLiteDB) -> sqlite3.Connection:
        db = connect(self)
        db.execute("PRAGMA journal_mode=DELETE")  # as a filesystem refusing WAL leaves it
        return db

    monkeypatch.setattr(SQLiteDB, "_connect", without_wal)
    store = Store(str(tmp_path / "no-wal.sqlite3"))
    try:
        assert "delete" == store._db.execute("PRAGMA journal_mode").fetchone()[0]
        assert 5000 == store._db.execute("PRAGMA busy_timeout").fetchone()[0]
        ran: list[int] = []
        assert store.run_at_once([lambda: ran.append(1)]) is None
        assert [] == ran
        owner = store.authenticate(store.create_credential("instance", "agent"))
        assert owner is not None
        made = store.create_request(
            owner=owner, idempotency_key="k", tool="t", arguments={}, timeout_seconds=60
        )
        assert made.created
    finally:
        store.close()
