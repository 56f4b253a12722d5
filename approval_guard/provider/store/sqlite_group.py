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

from approval_guard.provider.store import group_commit
from approval_guard.provider.store.group_commit import Batch

logger = logging.getLogger("approval_guard.provider")


class CommitFailed(group_commit.CommitFailed, sqlite3.DatabaseError):
    """The transaction that held this write did not commit: none of it was kept.

    Its ``__cause__`` is SQLite's error. Every write of the failed batch gets one.
    """


class SQLiteTransactions:
    """The SQLite writer connection's transaction statements (``isolation_level=None``)."""

    commit_failed: type[group_commit.CommitFailed] = CommitFailed

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @property
    def in_transaction(self) -> bool:
        return self.db.in_transaction

    def begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

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
