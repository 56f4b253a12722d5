"""The SQLite store: the provider's state in one file, for one process (or a few on one host)."""

from __future__ import annotations

from approval_guard.provider.store.models import Clock
from approval_guard.provider.store.sql.audit import AuditMixin
from approval_guard.provider.store.sql.channel_links import ChannelLinksMixin
from approval_guard.provider.store.sql.credentials import CredentialsMixin
from approval_guard.provider.store.sql.decisions import DecisionsMixin
from approval_guard.provider.store.sql.outbox import OutboxMixin
from approval_guard.provider.store.sql.queries import QueriesMixin
from approval_guard.provider.store.sql.waiting import WaitingMixin
from approval_guard.provider.store.sqlite_db import SQLiteDB


class SQLiteStore(
    CredentialsMixin,
    DecisionsMixin,
    WaitingMixin,
    QueriesMixin,
    AuditMixin,
    ChannelLinksMixin,
    OutboxMixin,
    SQLiteDB,
):
    """SQLite-backed provider state. Thread-safe; one instance per process and file.

    :param path: a file path (created if missing) or ``":memory:"``.
    :param clock: returns the provider's "now" as an aware datetime; defaults to
        the system clock. All timestamps and expiry decisions use it.

    Key retention is applied on open (:meth:`prune`).
    """

    def __init__(self, path: str = "approvals.sqlite3", *, clock: Clock | None = None) -> None:
        SQLiteDB.__init__(self, path, clock=clock)
        self.prune()
