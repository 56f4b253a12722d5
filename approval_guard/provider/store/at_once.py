"""Store work run at once on the calling thread, several calls in one transaction.

The provider's event loop hands a request's store work to a worker thread,
and each hop there and back costs more than the work itself on a small
machine (a thread wake-up, and the two threads taking turns at the GIL).
When the SQLite store's writer lock is free and no other process holds the
file's write lock, the loop runs the work itself instead: every call queued
in one turn of the loop, each write in a savepoint of its own (a call that
raises undoes only its own writes), and one ``COMMIT`` for them all. Reads
inside go through the writer connection, so a call reads what the batch
wrote before it, as it would read what a committed write left.

Nothing waits: :meth:`AtOnce.run` returns None, having run nothing, when the
lock is held (by a worker thread's write, or the WAL's checkpoint) or another
process writes; the caller then uses a worker thread as before. Every call's
outcome is given back only after the ``COMMIT``; if it fails, every call that
wrote (and every one that read, since what it read was never kept) gets
:class:`~approval_guard.provider.store.group_commit.CommitFailed` (on
SQLite, ``sqlite_group.CommitFailed``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from approval_guard.provider.store.group_commit import Batch, CommitFailed, GroupCommit

T = TypeVar("T")


class Outcome(Generic[T]):
    """What one call returned or raised."""

    __slots__ = ("error", "value")

    def __init__(self, value: T | None = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    def unwrap(self) -> T:
        """The value, or raise what the call raised."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class AtOnce:
    """Runs store calls on the calling thread in one batch of the writer's group commit.

    :param group: the store's writer lock and batches.
    :param wrote: told how many writes a committed batch held (the WAL's checkpoints count them).
    """

    def __init__(self, group: GroupCommit, wrote: Callable[[int], None]) -> None:
        self._group = group
        self._wrote = wrote
        # (thread, batch) while a thread runs a batch: its writes and reads go there.
        self._running: tuple[int, Batch] | None = None

    def batch(self) -> Batch | None:
        """The batch the current thread is running, or None (every other thread: None)."""
        running = self._running
        if running is not None and running[0] == threading.get_ident():
            return running[1]
        return None

    def run(
        self, calls: Sequence[Callable[[], Any]], *, until: float | None = None
    ) -> list[Outcome[Any]] | None:
        """Run ``calls`` in order in one transaction; None (nothing run) if that would wait.

        ``until`` (a ``time.monotonic()``): start no call after it, so a long
        queue does not hold the thread (the event loop) for long; the outcomes
        are then those of the first calls only, and the rest were not run.
        """
        group = self._group
        batch = group.open_now()
        if batch is None:
            return None
        before = batch.size
        outcomes: list[Outcome[Any]] = []
        self._running = (threading.get_ident(), batch)
        try:
            for call in calls:
                if until is not None and outcomes and time.monotonic() > until:
                    break
                try:
                    outcomes.append(Outcome(call()))
                except Exception as exc:
                    outcomes.append(Outcome(error=exc))
        finally:
            self._running = None
            committed = group.close_now(batch)
        if not committed:
            outcomes = [Outcome(error=self._commit_failed(batch)) for _ in outcomes]
        elif batch.size > before:
            self._wrote(batch.size - before)
        return outcomes

    def _commit_failed(self, batch: Batch) -> CommitFailed:
        failed = self._group.db.commit_failed(
            "the transaction holding this write did not commit; nothing of it was kept"
        )
        failed.__cause__ = batch.error
        return failed
