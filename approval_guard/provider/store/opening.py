"""Opening a store: SQLite by file name, or PostgreSQL by DSN.

The store lives in small modules beside this one: ``models`` (what it hands
out and its errors), ``checks`` (what it refuses), ``feed`` (who is told of
changes), ``protocol`` (what every store does), ``sql/`` (the behaviour,
written once), ``sqlite_db``/``sqlite`` (SQLite) and ``postgres_db``/``postgres``
(PostgreSQL). ``Store`` is the SQLite store::

    store = Store("approvals.sqlite3")            # or ":memory:"
    tokens = store.ensure_initial_credentials()   # FirstStartTokens | None
    token = store.create_credential("reviewer", "alice")
    cred = store.authenticate(token)              # Credential | None
    result = store.create_request(owner=cred, idempotency_key=..., tool=..., arguments=...,
                                  timeout_seconds=..., editable=("amount",))
    request = store.poll(request_id, viewer=cred, wait=30.0)
    store.decide(request_id, reviewer=cred, status="approved", note=None, valid_for=300,
                 arguments=None)                  # or the whole arguments, edits applied
    new = with_edits(request, {"amount": "2500"})  # JSON texts -> the whole arguments
    store.cancel(request_id, owner=cred, reason=None)
    store.list_requests(status="pending")
    store.history(request_id)
    store.wait_for_change(after=seq, timeout=25.0)
    unsubscribe = store.subscribe(lambda seq, request_ids: ...)
    store.close()

Time is the store's clock (aware UTC ``datetime``), injectable so tests can
run the provider ahead of or behind the adapter. A ``pending`` request whose
``deadline_at`` has passed is ``expired``; the transition is written (with an
audit event) the first time anyone looks, so deadlines keep running while the
server is down. Errors are the :class:`StoreError` subclasses; ``None`` means
"not found".
"""

from __future__ import annotations

from approval_guard.provider.store.models import Clock
from approval_guard.provider.store.protocol import StoreProtocol
from approval_guard.provider.store.sqlite import SQLiteStore

#: The SQLite store, under its short name.
Store = SQLiteStore


def open_store(
    *, db: str | None = None, dsn: str | None = None, clock: Clock | None = None
) -> StoreProtocol:
    """The PostgreSQL store for a DSN, otherwise the SQLite store in the file ``db``."""
    if dsn:
        from approval_guard.provider.store.postgres import PostgresStore

        return PostgresStore(dsn, clock=clock)
    return SQLiteStore(db or "approvals.sqlite3", clock=clock)


__all__ = ["Store", "open_store"]
