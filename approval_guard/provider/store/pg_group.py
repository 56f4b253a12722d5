"""Group commit's statements on PostgreSQL: a batch lock first, savepoints, a checked COMMIT.

A store's writers queue for one writer lock, under group commit
(``group_commit.py``); each batch borrows a connection from the store's pool
(the one its reads used last, most often) and gives it back once it has
committed or rolled back. A batch is one transaction, each member after
the first a ``SAVEPOINT`` (kept, not released: the ``COMMIT`` keeps them all,
and a failing member's ``ROLLBACK TO`` finds its own, the newest), and the
``NOTIFY`` of every member's changes is sent once, just before the ``COMMIT``
(one payload set, at the batch's highest change number; delivered at commit,
see ``pg_listen.py``).

**Lock order.** A batch begins with ``BEGIN`` and, in the same round trip, the
*batch lock* (:data:`BATCH_LOCK`, an advisory lock named for the schema),
before any member's statement; it is held to the ``COMMIT``. Without it,
batches could deadlock across instances: a batch on instance A whose first
member recorded a change holds the one-row ``ag_seq`` lock (every change takes
it to number itself, and keeps it to commit) while its second member wants the
row of request X, which a batch on instance B holds (its member deciding X)
while it waits for ``ag_seq``. And since a batch takes the locks of several
unrelated requests in whatever order its members came, two batches could take
*any* two locks in opposite orders (two polls' row updates, say): no order
among those locks can be imposed. The batch lock first means batches never
hold such locks at the same time: while one batch holds it, every other batch
of the schema, on any instance, waits for it at its first statement, holding
nothing yet that anyone could wait for; the holder finds whatever it takes
next (``ag_seq``, rows, an idempotency key's index entry) free, or held by a
reader, which waits for nothing. So batches of all instances run one after
another (changes were numbered one at a time, under ``ag_seq``, already), and
cannot wait in a cycle. The only other transaction writing the tables, a store
creating them (``pg_schema.py``), takes the batch lock right after its own
advisory lock, which no batch takes. Within one instance the writer lock
already lets one batch run at a time. And since the batch lock keeps every
other writer of the schema out, a write's own lock on a name (``Tx.lock``:
``request:<id>`` for a decision, ``reviewers``) is already held: it costs no
statement, as on SQLite, whose ``BEGIN IMMEDIATE`` does the same. (An earlier
build of this store, one transaction per write with those advisory locks and
``ag_seq`` taken last, must not share a database with this one; no release had
it.)

The batch lock is an advisory lock rather than ``SELECT ... FROM ag_seq FOR
UPDATE``, which would serve as well: locking the row writes it (and its WAL),
and cost a lone write about 110 µs here against 60 µs for the advisory lock.

**Statement errors.** After a failed statement the connection is
``INERROR``: ``ROLLBACK TO SAVEPOINT`` (undoing that member alone, and
releasing the locks it took after its savepoint) makes it usable again. Locks
a member took and kept are held until the batch commits, as a lone write's
were until its own. A member whose body ends with the transaction ``INERROR``
(it swallowed a statement's error) fails the whole batch. PostgreSQL answers a
``COMMIT`` of a failed transaction with ``ROLLBACK``, no error: a batch whose
transaction is not cleanly open is refused before its ``COMMIT``, and one whose
``COMMIT`` did not say ``COMMIT`` fails (:class:`RolledBack`), so no member is
ever answered for a write that was not kept.

**A lost connection** fails every member of the batch it held (a member's
undo finds no transaction; a ``COMMIT`` that raised may or may not have
committed, so nobody is answered as if it had); the pool drops it. One found
lost at a batch's ``BEGIN`` (it died idle in the pool), with nothing done yet,
is dropped and the batch begins on another.

A batch of at most 64 writes has at most 63 savepoints: within the 64
subtransactions a PostgreSQL backend tracks in shared memory without slowing
every snapshot on the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from approval_guard.exceptions import ProviderError
from approval_guard.provider.store.group_commit import Batch, CommitFailed
from approval_guard.provider.store.pg_listen import payloads

logger = logging.getLogger("approval_guard.provider")

#: Taken first by every transaction that writes the tables; held to its end.
BATCH_LOCK = (
    "SELECT pg_advisory_xact_lock("
    "hashtextextended('approval_guard.provider batches ' || current_schema(), 0))"
)
#: A batch's first round trip: its transaction, and the batch lock.
BEGIN = "BEGIN; " + BATCH_LOCK


class RolledBack(ProviderError):
    """PostgreSQL rolled the batch's transaction back (a statement in it failed)."""


class PostgresTransactions:
    """The PostgreSQL store's transaction statements, on a connection each batch borrows.

    :param take: a connection from the store's pool (autocommit), for one batch.
    :param give_back: returns it (a broken or closed one is dropped).
    :param channel: where the store's ``NOTIFY``\\s go; ``instance`` names the sender.
    """

    commit_failed: type[CommitFailed] = CommitFailed

    def __init__(
        self,
        take: Callable[[], Any],
        give_back: Callable[[Any], None],
        *,
        channel: str,
        instance: str,
    ) -> None:
        self._take = take
        self._give_back = give_back
        self._channel = channel
        self._instance = instance
        #: The open batch's connection (None between batches).
        self.conn: Any = None

    @property
    def in_transaction(self) -> bool:
        return self.conn is not None

    def begin(self) -> None:
        for attempt in (1, 2):
            conn = self.conn = self._take()
            try:
                conn.execute(BEGIN)
                return
            except BaseException as exc:
                stale = conn.broken and isinstance(exc, Exception)
                self.rollback()
                # Lost while idle in the pool (a server restart, a dropped socket)
                # before anything was done: one more try, on another connection.
                if not stale or attempt == 2:
                    raise

    def begin_at_once(self) -> bool:
        # A round trip to the server, and the batch lock, may always wait: never at once.
        return False

    def savepoint(self) -> None:
        self.conn.execute("SAVEPOINT member")

    def release(self) -> None:
        from psycopg.pq import TransactionStatus

        # No RELEASE (a round trip per member): the savepoint stays, nested under the
        # next member's, and the COMMIT keeps them all; ROLLBACK TO always finds the
        # newest, the failing member's own. Only a transaction still usable may go on.
        if self.conn.info.transaction_status != TransactionStatus.INTRANS:
            raise RolledBack("a statement of this write failed; its transaction cannot commit")

    def undo(self) -> bool:
        from psycopg.pq import TransactionStatus

        conn = self.conn
        if conn.broken or conn.info.transaction_status not in (
            TransactionStatus.INTRANS,
            TransactionStatus.INERROR,
        ):
            return False
        conn.execute("ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member")
        return True

    def commit(self, batch: Batch) -> None:
        from psycopg.pq import TransactionStatus

        conn = self.conn
        if conn.info.transaction_status != TransactionStatus.INTRANS:
            raise RolledBack("a statement of this transaction failed; it cannot commit")
        if batch.changed:
            for payload in payloads(self._instance, batch.seq, tuple(batch.changed)):
                conn.execute("SELECT pg_notify(%s, %s)", (self._channel, payload))
        if conn.execute("COMMIT").statusmessage != "COMMIT":
            raise RolledBack("PostgreSQL rolled this transaction back instead of committing it")
        self.conn = None
        self._give_back(conn)

    def rollback(self) -> None:
        import psycopg

        conn, self.conn = self.conn, None
        if conn is None:
            return
        try:
            if not conn.broken:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            # In a state nobody can trust: dropped, not pooled.
            logger.warning("could not roll back a failed PostgreSQL transaction; closing it")
            conn.close()
        self._give_back(conn)
