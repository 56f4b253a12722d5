"""Group commit's statements on SQLite: ``BEGIN IMMEDIATE``, a savepoint per member, ``COMMIT``.

``BEGIN IMMEDIATE`` takes the file's one write lock at once (waiting up to the
connection's ``busy_timeout`` for a writer in another process), so a batch
never meets another writer halfway. SQLite itself rolls the whole transaction
back on some errors (``SQLITE_FULL``, ``SQLITE_IOERR``): a member's undo then
finds no transaction, and the batch fails (``group_commit.py``).
"""

from __future__ import annotations

import logging
import sqlite3
import time

from approval_guard.provider.store import group_commit
from approval_guard.provider.store.group_commit import Batch

logger = logging.getLogger("approval_guard.provider")


class CommitFailed(group_commit.CommitFailed, sqlite3.DatabaseError):
    """The transaction that held this write did not commit: none of it was kept.

    Its ``__cause__`` is SQLite's error. Every write of the failed batch gets one.
    """


#: How long a writer waits for another process's write lock (SQLite's busy timeout).
BUSY_TIMEOUT_MS = 5000
#: The longest pause between two tries for it.
_LONGEST_PAUSE = 0.025
# SQLite's result codes for a lock held elsewhere (the primary code, extended ones masked).
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """True when the error says another connection holds a lock this one needs."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    text = str(exc)
    return "database is locked" in text or "database table is locked" in text


class SQLiteTransactions:
    """The SQLite writer connection's transaction statements (``isolation_level=None``)."""

    commit_failed: type[group_commit.CommitFailed] = CommitFailed

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @property
    def in_transaction(self) -> bool:
        return self.db.in_transaction

    def begin(self) -> None:
        # The writer connection's own busy timeout is 0 (so a begin at once never waits):
        # the wait SQLite's busy handler would do for another process's writer is here.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        pause = 0.001
        while not self.begin_at_once():
            left = deadline - time.monotonic()
            if left <= 0:
                raise sqlite3.OperationalError("database is locked")
            time.sleep(min(pause, left))
            pause = min(2 * pause, _LONGEST_PAUSE)

    def begin_at_once(self) -> bool:
        try:
            self.db.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            return False

    def savepoint(self) -> None:
        self.db.execute("SAVEPOINT member")

    def release(self) -> None:
        self.db.execute("RELEASE member")

    def undo(self) -> bool:
        if not self.db.in_transaction:
            return False
        self.db.execute("ROLLBACK TO member")
        self.db.execute("RELEASE member")
        return True

    def commit(self, batch: Batch) -> None:
        del batch
        self.db.execute("COMMIT")

    def rollback(self) -> None:
        if not self.db.in_transaction:
            return
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:  # pragma: no cover - the next batch's BEGIN retries it
            logger.exception("could not roll back a failed SQLite transaction")
