"""Checkpoints of the SQLite store's WAL, off the writers' path.

SQLite's own checkpoint runs inside the ``COMMIT`` that crosses its threshold
(1,000 pages): that writer copies the WAL into the database file and syncs it,
holding the write lock all the while, so every decision queued behind it
waits too (milliseconds on a busy disk). The store turns that off on its
writer connection and, every :data:`WRITES_PER_CHECKPOINT` writes, runs a
``PASSIVE`` checkpoint in a short-lived thread of its own with its own
connection, which never blocks a writer. A passive checkpoint cannot end the
WAL while writers keep appending to it, so right after it the store's
``restart`` copies the few frames written meanwhile and starts the WAL over
(``RESTART``, under the store's writer lock: one short wait per round, not one
per thousand pages inside somebody's commit). Durability is unchanged: a
commit is in the WAL before it is answered, and the WAL is read back after a
crash whether or not a checkpoint had copied it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

logger = logging.getLogger("approval_guard.provider")

#: Writes (each one transaction's worth of pages, or less) between two checkpoints.
WRITES_PER_CHECKPOINT = 200


class Checkpointer:
    """Checkpoints the WAL at ``path`` after every ``every`` writes, then calls ``restart``."""

    def __init__(
        self, path: str, restart: Callable[[], None], *, every: int = WRITES_PER_CHECKPOINT
    ) -> None:
        self._path = path
        self._restart = restart
        self._every = every
        self._writes = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: Checkpoints that ran (for tests).
        self.done = 0

    def wrote(self, writes: int = 1) -> None:
        """Count committed writes; start a checkpoint when it is time and none runs."""
        with self._lock:
            self._writes += writes
            if self._writes < self._every or self._thread is not None or self._closed:
                return
            self._writes = 0
            thread = self._thread = threading.Thread(
                target=self._run, name="approval-guard-checkpoint", daemon=True
            )
        thread.start()

    def _run(self) -> None:
        try:
            db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            try:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                db.close()
            self._restart()
            self.done += 1
        except sqlite3.Error:
            logger.exception("checkpointing the SQLite WAL failed (the next one retries)")
        finally:
            with self._lock:
                self._thread = None

    def close(self) -> None:
        """Start no more checkpoints, and wait (a little) for one running to end."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            thread.join(10)
