"""The local approval provider: SQLite store, HTTP API (docs/provider-api.md), review page.

Run it with ``approval-guard serve``, or in-process::

    from approval_guard.provider import ProviderServer

    with ProviderServer("approvals.sqlite3") as server:
        print(server.url)

For tests, :class:`approval_guard.testing.LocalProvider` wraps it with drivable
helpers and fault injection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from approval_guard.provider.channels.slack.settings import SlackSettings
from approval_guard.provider.channels.webhooks.signing import WebhookSignatureError, WebhookTarget
from approval_guard.provider.channels.webhooks.signing import new_secret as new_webhook_secret
from approval_guard.provider.channels.webhooks.signing import verify as verify_webhook
from approval_guard.provider.http.limits import DEFAULT_POLL_CAP, MAX_BODY_BYTES
from approval_guard.provider.store.models import (
    Credential,
    FirstStartTokens,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    NotPendingError,
    StoreClosedError,
    StoreError,
)
from approval_guard.provider.store.opening import Store, open_store
from approval_guard.provider.store.postgres import PostgresStore
from approval_guard.provider.store.protocol import StoreProtocol

if TYPE_CHECKING:
    from approval_guard.provider.serving.lifecycle import ProviderServer


def __getattr__(name: str) -> Any:
    # The server needs the `server` extra (starlette, uvicorn); the store does not, so
    # importing a store or an error type must not import them.
    if name == "ProviderServer":
        try:
            from approval_guard.provider.serving.lifecycle import ProviderServer
        except ImportError as exc:
            raise ImportError(
                "the provider's server needs the `server` extra: "
                f"pip install 'approval-guard[server]' ({exc})"
            ) from exc
        return ProviderServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_POLL_CAP",
    "MAX_BODY_BYTES",
    "Credential",
    "FirstStartTokens",
    "IdempotencyKeyInUse",
    "IdempotencyKeyReused",
    "NotPendingError",
    "PostgresStore",
    "ProviderServer",
    "SlackSettings",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreProtocol",
    "WebhookSignatureError",
    "WebhookTarget",
    "new_webhook_secret",
    "open_store",
    "verify_webhook",
]
