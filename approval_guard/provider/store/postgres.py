"""The PostgreSQL store: the provider's state shared by any number of instances on one database."""

from __future__ import annotations

from approval_guard.provider.store.models import Clock
from approval_guard.provider.store.postgres_db import POOL_SIZE, PostgresDB
from approval_guard.provider.store.sql.audit import AuditMixin
from approval_guard.provider.store.sql.channel_links import ChannelLinksMixin
from approval_guard.provider.store.sql.credentials import CredentialsMixin
from approval_guard.provider.store.sql.decisions import DecisionsMixin
from approval_guard.provider.store.sql.outbox import OutboxMixin
from approval_guard.provider.store.sql.queries import QueriesMixin
from approval_guard.provider.store.sql.waiting import WaitingMixin


class PostgresStore(
    CredentialsMixin,
    DecisionsMixin,
    WaitingMixin,
    QueriesMixin,
    AuditMixin,
    ChannelLinksMixin,
    OutboxMixin,
    PostgresDB,
):
    """PostgreSQL-backed provider state: the SQLite store's behaviour, across instances.

    Several stores (threads, processes, hosts) may share one database: an
    idempotent create raced on two makes one request, a deadline expires once,
    of racing decisions one wins, and a decision on one wakes a poll waiting on
    another at once (``LISTEN``/``NOTIFY``). ``seq`` and ``wait_for_change``
    follow every instance's changes.

    :param dsn: a libpq connection string or URL; its password never reaches a
        repr, a log line or an error message.
    :param clock: the provider's "now", as for ``Store``.
    :param pool_size: connections kept for reads and writes (one more listens).

    ::

        store = PostgresStore("postgresql://provider@db.internal/approvals")
    """

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        pool_size: int = POOL_SIZE,
        connect_timeout: float = 5,
    ) -> None:
        PostgresDB.__init__(
            self, dsn, clock=clock, pool_size=pool_size, connect_timeout=connect_timeout
        )
        self.prune()

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r})"
