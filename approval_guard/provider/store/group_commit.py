"""Group commit: writers queued on a store's writer lock share one transaction.

The first writer to take the writer connection's lock begins a transaction,
a *batch*; every writer that takes the lock while it is open joins it in a
savepoint of its own, so a body that raises undoes only its own changes
(rolled back to its savepoint, which is then released). The opener takes no
savepoint: nobody else is in the batch while its body runs, so rolling the
whole transaction back undoes it alone, and a lone writer costs what it did
before grouping (a savepoint makes SQLite keep a sub-journal of what each
statement changes, and costs PostgreSQL a round trip).

When its body is done, a writer that sees another thread waiting for the lock
hands the open batch on and waits; one that sees none waiting (or the batch at
:data:`BATCH_LIMIT`) commits it. No writer sleeps to gather others, so a lone
writer commits at once. Only after the ``COMMIT`` is every member answered
and the change feed told; if the ``COMMIT`` fails, it is rolled back, every
member gets :class:`CommitFailed`, and the next writer begins a new batch.

Whatever else takes the lock (:meth:`GroupCommit.exclusive`: the SQLite
store's public ``transaction()``, closing) commits an open batch first, so it
never begins inside one.

A writer does ``batch, opened = group.join()``, runs its body (calling
``batch.keep(seq, request_ids)`` when it succeeded), then
``group.leave(batch, opened, failure)`` with the body's exception or None.

The machinery is the same for every database; what a database's statements
are (``BEGIN IMMEDIATE`` on SQLite; ``BEGIN`` and a batch lock on
PostgreSQL, with a ``COMMIT`` checked, since PostgreSQL answers a ``COMMIT`` of
a failed transaction by rolling it back) is a :class:`Transactions`
(``sqlite_group.py``, ``pg_group.py``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from approval_guard.exceptions import ProviderError

#: Most writes one transaction holds, however many writers wait.
BATCH_LIMIT = 64


class CommitFailed(ProviderError):
    """The transaction that held this write did not commit: none of it was kept.

    Its ``__cause__`` is the database's error. Every write of the failed batch
    gets one (on SQLite, ``sqlite_group.CommitFailed``, a ``sqlite3.DatabaseError`` too).
    """


class Batch:
    """One transaction shared by several writers, and what its members changed."""

    __slots__ = ("changed", "ended", "error", "seq", "size")

    def __init__(self) -> None:
        self.size = 0
        self.seq = 0
        self.changed: dict[str, None] = {}
        # Set (under GroupCommit's ``_ended`` condition) once committed or failed.
        self.ended = False
        # Set when the batch cannot commit (or did not): every member fails.
        self.error: BaseException | None = None

    def keep(self, seq: int, changed: Sequence[str]) -> None:
        """A member's changes, announced if (and once) the batch commits."""
        if changed:
            self.seq = max(self.seq, seq)
            self.changed.update(dict.fromkeys(changed))


class Transactions(Protocol):
    """A writer connection's transaction statements, as group commit uses them.

    Called only by the thread holding the writer lock.
    """

    #: What every member of a batch that did not commit gets.
    commit_failed: type[CommitFailed]

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open on the connection (a failed one included)."""
        ...

    def begin(self) -> None:
        """Begin a batch's transaction (it may wait for writers elsewhere)."""
        ...

    def begin_at_once(self) -> bool:
        """Begin a batch's transaction only if nothing must wait for it; False: nothing begun."""
        ...

    def savepoint(self) -> None:
        """Mark where a joining member's part begins."""
        ...

    def release(self) -> None:
        """Keep the member's part (release its savepoint)."""
        ...

    def undo(self) -> bool:
        """Undo the member's part alone; False if the whole transaction is gone already."""
        ...

    def commit(self, batch: Batch) -> None:
        """Commit the batch's transaction, or raise (it may still be open then)."""
        ...

    def rollback(self) -> None:
        """Roll back the open transaction, if any, a failed one included; never raises."""
        ...


class GroupCommit:
    """The writer connection's lock, and the batch open on it.

    :param db: the writer connection's transaction statements.
    :param announce: ``announce(seq, request_ids)`` after a batch that changed
        requests committed (the change feed), with the lock released.
    :param check_open: raises once the store is closed.
    """

    def __init__(
        self,
        db: Transactions,
        announce: Callable[[int, tuple[str, ...]], None],
        check_open: Callable[[], None],
    ) -> None:
        self.db = db
        #: Reentrant: SQLite's ``":memory:"`` reads through the writer connection inside a write.
        self.lock = threading.RLock()
        self._announce = announce
        self._check_open = check_open
        self._batch: Batch | None = None
        # Threads blocked on the lock, and whether a member's body runs (under the lock).
        self._waiting = 0
        self._waiting_lock = threading.Lock()
        self._in_body = False
        # Members that handed their batch on wait here for its end.
        self._ended = threading.Condition(threading.Lock())

    @property
    def waiting(self) -> int:
        """How many threads are blocked on the lock right now."""
        return self._waiting

    # ------------------------------------------------------------------ the ways in

    def join(self) -> tuple[Batch, bool]:
        """Take the lock and join the open batch (a savepoint) or begin one; True if begun."""
        self._acquire()
        if self._in_body:
            # This thread, inside its own write (the lock is reentrant): leave the batch be.
            self.lock.release()
            self._refuse_nesting()
        try:
            self._check_open()
            batch = self._batch
            opened = batch is None
            if batch is None:
                if self.db.in_transaction:  # pragma: no cover - left by a failed ROLLBACK
                    self.rollback()
                # May wait (SQLite's busy_timeout, PostgreSQL's row lock) for writers elsewhere.
                self.db.begin()
                batch = self._batch = Batch()
            else:
                self.db.savepoint()
        except BaseException as exc:
            if self._batch is not None:
                # Refused in an open batch: its state is unknown, it must not commit.
                self._batch.error = self._batch.error or exc
            self._pass_on()
            raise
        batch.size += 1
        self._in_body = True
        return batch, opened

    def leave(self, batch: Batch, opened: bool, failure: BaseException | None) -> None:
        """End a member: keep or undo its part, pass the lock on, return once the batch ended.

        Raises the body's own ``failure``, to it alone; if the batch did not
        commit, :class:`CommitFailed` instead (for a body that raised too: what
        it saw may have been another member's write, never committed), except
        for interrupts such as ``KeyboardInterrupt``, which go on as they are.
        """
        self._in_body = False
        try:
            if failure is None:
                if not opened:
                    self.db.release()
            elif opened:
                # Alone in the batch so far: undo it all; the next writer begins anew.
                self._batch = None
                self.rollback()
                batch.ended = True
            elif not self.db.undo():
                # The database rolled the whole transaction back itself (SQLite's
                # SQLITE_FULL or IOERR, a lost PostgreSQL connection): every member's
                # work is gone.
                batch.error = batch.error or failure
        except BaseException as exc:
            # The connection is in an unknown state: the batch must not commit.
            batch.error = batch.error or exc
        finally:
            self._pass_on()
        if not batch.ended:
            with self._ended:
                while not batch.ended:
                    self._ended.wait()
        if batch.error is not None and (failure is None or isinstance(failure, Exception)):
            raise self.db.commit_failed(
                "the transaction holding this write did not commit; nothing of it was kept"
            ) from batch.error
        if failure is not None:
            raise failure

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the lock with no batch open (one open is committed first), outside any batch.

        The committed batch's members are answered when this ends.
        """
        self._acquire()
        ended = None
        try:
            self._refuse_nesting()
            ended = self._end()
            yield
        finally:
            self.lock.release()
            if ended is not None:
                self._finish(ended, others_wait=True)

    # ------------------------------------------------------------------ at once, on one thread

    def open_now(self) -> Batch | None:
        """Take the lock and a batch without waiting for anything; None if that would wait.

        For a caller that must not block (the provider's event loop,
        ``at_once.py``): the lock taken only if free, and the transaction
        begun only if it need not wait (:meth:`Transactions.begin_at_once`).
        A batch already open (its members handed it on and wait) is joined.
        The caller then runs its writes in :meth:`member` and always ends with
        :meth:`close_now`.
        """
        if not self.lock.acquire(blocking=False):
            return None
        if self._in_body:  # this thread, inside its own write: not a way in
            self.lock.release()
            return None
        try:
            self._check_open()
            batch = self._batch
            if batch is None:
                if self.db.in_transaction:  # pragma: no cover - left by a failed ROLLBACK
                    self.rollback()
                if not self.db.begin_at_once():
                    self.lock.release()
                    return None
                batch = self._batch = Batch()
        except BaseException:
            self.lock.release()
            raise
        return batch

    @contextlib.contextmanager
    def member(self, batch: Batch) -> Iterator[None]:
        """One write in a batch this thread holds (:meth:`open_now`): its own savepoint.

        A body that raises undoes only its own part, and the exception goes on.
        """
        self._refuse_nesting()
        if batch.error is not None:
            # The batch cannot commit: writing more into it would only be undone.
            raise self.db.commit_failed(
                "the transaction holding this write did not commit; nothing of it was kept"
            ) from batch.error
        self.db.savepoint()
        batch.size += 1
        self._in_body = True
        try:
            yield
        except BaseException as exc:
            self._in_body = False
            try:
                if not self.db.undo():
                    # The database rolled the whole transaction back: every member's work is gone.
                    batch.error = batch.error or exc
            except BaseException as undo:
                batch.error = batch.error or undo
            raise
        self._in_body = False
        try:
            self.db.release()
        except BaseException as exc:
            batch.error = batch.error or exc
            raise

    def close_now(self, batch: Batch) -> bool:
        """End what :meth:`open_now` began: commit (members who wait are answered), release.

        False when the batch did not commit: nothing of it was kept.
        """
        ended = None
        try:
            ended = self._end()
        finally:
            self.lock.release()
            if ended is not None:
                self._finish(ended, others_wait=True)
        return batch.error is None

    def rollback(self) -> None:
        """Roll back the connection's transaction, if one is open (a failed one included)."""
        self.db.rollback()

    # ------------------------------------------------------------------ the machinery

    def _acquire(self) -> None:
        """Take the lock, counted among the waiters while another thread holds it."""
        if self.lock.acquire(blocking=False):
            return
        with self._waiting_lock:
            self._waiting += 1
        try:
            self.lock.acquire()
        finally:
            with self._waiting_lock:
                self._waiting -= 1

    def _refuse_nesting(self) -> None:
        if self._in_body:
            raise RuntimeError("a store write cannot begin inside another write's transaction")

    def _pass_on(self) -> None:
        """Release the lock: to a waiter with the batch still open, else after ending it."""
        batch = self._batch
        ended = None
        try:
            if batch is not None and (
                batch.error is not None or batch.size >= BATCH_LIMIT or not self._waiting
            ):
                ended = self._end()
        finally:
            self.lock.release()
            if ended is not None:
                # Every member but this thread handed the batch on, and waits.
                self._finish(ended, others_wait=ended.size > 1)

    def _end(self) -> Batch | None:
        """Under the lock: commit the open batch (roll it back if it failed); None if none."""
        batch = self._batch
        if batch is None:
            return None
        self._batch = None
        if batch.error is None:
            try:
                self.db.commit(batch)
                return batch
            except BaseException as exc:
                batch.error = exc
        # A failed COMMIT (a deferred constraint, a full disk) may leave it open.
        self.rollback()
        return batch

    def _finish(self, batch: Batch, *, others_wait: bool) -> None:
        """With the lock released: announce a committed batch's changes, wake its members."""
        try:
            if batch.error is None and batch.changed:
                self._announce(batch.seq, tuple(batch.changed))
        finally:
            if others_wait:
                with self._ended:
                    batch.ended = True
                    self._ended.notify_all()
            else:
                # A lone writer's batch: nobody waits on the condition.
                batch.ended = True
