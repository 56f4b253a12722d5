"""The SQLite WAL is checkpointed off the writers' path, and nothing written is lost by it."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from approval_guard.provider import Store
from approval_guard.provider.store.sqlite_checkpoint import WRITES_PER_CHECKPOINT
from tests.support.api import wait_for
from tests.support.group import wait_for_waiters


def _make(store: Store, n: int) -> list[str]:
    owner = store.authenticate(store.create_credential("instance", "agent"))
    assert owner is not None
    return [
        store.create_request(
            owner=owner, idempotency_key=f"k{k}", tool="t", arguments={"k": k}, timeout_seconds=60
        ).request.id
        for k in range(n)
    ]


def _wal_pages(path: Path) -> int:
    wal = Path(str(path) + "-wal")
    return wal.stat().st_size // 4096 if wal.exists() else 0


def test_no_commit_checkpoints_by_itself(tmp_path: Path) -> None:
    """The writer connection's own automatic checkpoint is off: COMMITs only append to the WAL."""
    store = Store(str(tmp_path / "a.sqlite3"))
    try:
        with store.transaction() as db:
            (setting,) = db.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert 0 == setting
    finally:
        store.close()


def test_a_checkpoint_runs_in_the_background_after_enough_writes(tmp_path: Path) -> None:
    """After enough writes a checkpoint copies the WAL into the file, in a thread of its own."""
    path = tmp_path / "a.sqlite3"
    store = Store(str(path))
    try:
        _make(store, WRITES_PER_CHECKPOINT + 10)
        wait_for(lambda: store._checkpoints.done, timeout=10, what="no checkpoint ran")
    finally:
        store.close()


def test_the_wal_does_not_grow_without_bound(tmp_path: Path) -> None:
    """Many writes later the WAL is still about one round of writes long: it starts over."""
    path = tmp_path / "a.sqlite3"
    store = Store(str(path))
    try:
        _make(store, WRITES_PER_CHECKPOINT // 2)
        per_write = _wal_pages(path) / (WRITES_PER_CHECKPOINT // 2)
        for _ in range(6):
            _make(store, WRITES_PER_CHECKPOINT)
        assert _wal_pages(path) < 3 * WRITES_PER_CHECKPOINT * per_write
    finally:
        store.close()


def test_everything_written_is_read_back_after_reopening(tmp_path: Path) -> None:
    """Writes made across checkpoints are all there when the file is opened again."""
    path = tmp_path / "a.sqlite3"
    store = Store(str(path))
    try:
        ids = _make(store, 2 * WRITES_PER_CHECKPOINT + 7)
    finally:
        store.close()
    again = Store(str(path))
    try:
        assert all(again.get_request(one) is not None for one in ids)
    finally:
        again.close()


def _wal_frames(path: Path) -> int:
    """How many frames the WAL holds now (a passive checkpoint's count of them)."""
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        return int(db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        db.close()


def test_the_wal_starts_over_once_a_reader_in_the_middle_of_it_is_done(tmp_path: Path) -> None:
    """A reader holds the WAL for 0.3 s at the checkpoint: the restart waits it out, and the
    write queued meanwhile goes to the start of a new WAL, not after all the old frames."""
    path = tmp_path / "a.sqlite3"
    store = Store(str(path))
    reader = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    restarting = threading.Event()
    restart = store._checkpoints._restart

    def restart_told() -> None:
        restarting.set()
        restart()

    store._checkpoints._restart = restart_told
    try:
        owner = store.authenticate(store.create_credential("instance", "agent"))
        assert owner is not None
        _make(store, 50)
        assert _wal_frames(path) > 50
        _make(store, 5)  # not yet copied: the reader below reads them from the WAL
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM requests").fetchone()

        # The reader ends its read once the write below waits behind the restart.
        def end_the_read() -> None:
            wait_for_waiters(store, 1)
            reader.execute("COMMIT")

        done = threading.Thread(target=end_the_read)
        done.start()
        # What the checkpoint thread runs: a PASSIVE checkpoint, then the restart.
        checkpoint = threading.Thread(target=store._checkpoints._run)
        checkpoint.start()
        assert restarting.wait(10)
        lock = store._group.lock

        def held() -> bool:
            if lock.acquire(blocking=False):
                lock.release()
                return False
            return True

        wait_for(held, timeout=10, what="the restart holding the writer lock")
        store.create_request(
            owner=owner, idempotency_key="after", tool="t", arguments={}, timeout_seconds=60
        )
        frames = _wal_frames(path)
        checkpoint.join(10)
        done.join(10)
        assert frames < 30, frames  # else after the 50 writes' frames and more
    finally:
        reader.close()
        store.close()
