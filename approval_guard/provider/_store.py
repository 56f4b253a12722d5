"""The provider's store, by its old address: every name the HTTP layer and the CLI import.

The store itself lives in small modules: ``_models`` (what it hands out and
its errors), ``_checks`` (what it refuses), ``_feed`` (who is told of
changes), ``_protocol`` (what every store does), ``_sql_*`` (the behaviour,
written once), ``_sqlite_db``/``_sqlite`` (SQLite) and ``_pg_db``/``_pg``
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

from approval_guard._json import (
    MAX_JSON_DEPTH,
    InvalidJSON,
    JSONNumber,
    canonical_json,
    check_json_value,
    dump_json,
    load_json,
)
from approval_guard._redact import REDACTED_KEY
from approval_guard._redact import holds_marker_key as contains_redacted
from approval_guard.provider._checks import (
    GIVEN_TOKEN_LENGTH,
    MAX_EDITABLE,
    body_hash,
    changed_names,
    check_edit,
    check_editable,
    check_given_token,
    with_edits,
)
from approval_guard.provider._models import (
    CREDENTIAL_KINDS,
    INSTANCE,
    KEY_RETENTION,
    REVIEWER,
    SESSION_LIFETIME,
    AlreadyApproved,
    Annotation,
    Approval,
    AuditEvent,
    AuditRow,
    Clock,
    CreateResult,
    Credential,
    FirstStartTokens,
    Forbidden,
    History,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidEdit,
    NotPendingError,
    Session,
    StoreClosedError,
    StoredRequest,
    StoreError,
    UnknownRequest,
    ValidityTooLong,
    system_clock,
)
from approval_guard.provider._protocol import StoreProtocol
from approval_guard.provider._sql_credentials import ReviewerNameError
from approval_guard.provider._sqlite import SQLiteStore

#: The SQLite store, under the name everything imports.
Store = SQLiteStore


def open_store(
    *, db: str | None = None, dsn: str | None = None, clock: Clock | None = None
) -> StoreProtocol:
    """The store ``serve`` runs on: PostgreSQL for a ``dsn``, else the SQLite file ``db``."""
    if dsn:
        from approval_guard.provider._pg import PostgresStore

        return PostgresStore(dsn, clock=clock)
    return SQLiteStore(db or "approvals.sqlite3", clock=clock)


__all__ = [
    "CREDENTIAL_KINDS",
    "GIVEN_TOKEN_LENGTH",
    "INSTANCE",
    "KEY_RETENTION",
    "MAX_EDITABLE",
    "MAX_JSON_DEPTH",
    "REDACTED_KEY",
    "REVIEWER",
    "SESSION_LIFETIME",
    "AlreadyApproved",
    "Annotation",
    "Approval",
    "AuditEvent",
    "AuditRow",
    "Clock",
    "CreateResult",
    "Credential",
    "FirstStartTokens",
    "Forbidden",
    "History",
    "IdempotencyKeyInUse",
    "IdempotencyKeyReused",
    "InvalidEdit",
    "InvalidJSON",
    "JSONNumber",
    "NotPendingError",
    "ReviewerNameError",
    "SQLiteStore",
    "Session",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreProtocol",
    "StoredRequest",
    "UnknownRequest",
    "ValidityTooLong",
    "body_hash",
    "canonical_json",
    "changed_names",
    "check_edit",
    "check_editable",
    "check_given_token",
    "check_json_value",
    "contains_redacted",
    "dump_json",
    "load_json",
    "open_store",
    "system_clock",
    "with_edits",
]
