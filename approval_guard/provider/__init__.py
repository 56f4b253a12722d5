"""The local approval provider: SQLite store, HTTP API (PROVIDER_API.md), review page.

Run it with ``approval-guard serve``, or in-process::

    from approval_guard.provider import ProviderServer

    with ProviderServer("approvals.sqlite3") as server:
        print(server.url)

For tests, :class:`approval_guard.testing.LocalProvider` wraps it with drivable
helpers and fault injection.
"""

from approval_guard.provider._server import DEFAULT_POLL_CAP, MAX_BODY_BYTES, ProviderServer
from approval_guard.provider._store import (
    Credential,
    FirstStartTokens,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    NotPendingError,
    Store,
    StoreClosedError,
    StoreError,
)

__all__ = [
    "DEFAULT_POLL_CAP",
    "MAX_BODY_BYTES",
    "Credential",
    "FirstStartTokens",
    "IdempotencyKeyInUse",
    "IdempotencyKeyReused",
    "NotPendingError",
    "ProviderServer",
    "Store",
    "StoreClosedError",
    "StoreError",
]
