"""The one decision path: every channel (API, page, CLI, Slack, email, each one since) decides here.

:func:`decide` records a reviewer's decision through the store, which checks,
in the transaction that writes it, the reviewer's live credential and roles,
the tool's rule (who may decide, self-approval, quorum, ``max_valid_for``,
grants), edits, a link's single use, and writes the audit row. A channel never
calls the store's ``decide`` itself: a rule added here binds every channel.
:func:`refusal` words a refusal for a channel's reply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from approval_guard._codec.exact_json import InvalidJSON
from approval_guard.provider.store.models import (
    AlreadyApproved,
    Forbidden,
    GrantRefused,
    InvalidEdit,
    LinkUsed,
    NotPendingError,
    ValidityTooLong,
)

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from approval_guard.provider.rules.config import Rules
    from approval_guard.provider.store.models import Credential, Grant, StoredRequest
    from approval_guard.provider.store.protocol import StoreProtocol
    from approval_guard.provider.store.sql.grant_tables import GrantSpec

#: The store's refusals of a decision (each names what was wrong, never a secret).
REFUSALS: tuple[type[Exception], ...] = (
    NotPendingError,
    Forbidden,
    AlreadyApproved,
    LinkUsed,
    InvalidEdit,
    InvalidJSON,
    ValidityTooLong,
    GrantRefused,
)


def decide(
    store: StoreProtocol,
    rules: Rules | None,
    request_id: str,
    reviewer: Credential,
    status: str,
    *,
    note: str | None = None,
    valid_for: float | timedelta | None = None,
    expires_at: datetime | None = None,
    arguments: dict[str, Any] | None = None,
    source: str,
    channel: str,
    channel_user: str | None = None,
    use_once: str | None = None,
    grant: GrantSpec | None = None,
) -> tuple[StoredRequest | None, Grant | None]:
    """Blocking: record ``reviewer``'s decision; ``(request, grant given)``, None: no such request.

    Raises one of :data:`REFUSALS` when it records nothing. ``valid_for`` None
    is the default validity (five minutes, or the rule's ``max_valid_for``);
    ``expires_at`` sets an approval's expiry outright (the testing reviewer's).
    """
    return store.decide_granting(
        request_id,
        reviewer=reviewer,
        status=status,
        note=note,
        valid_for=valid_for,
        expires_at=expires_at,
        arguments=arguments,
        rules=rules,
        source=source,
        channel=channel,
        channel_user=channel_user,
        use_once=use_once,
        grant=grant,
    )


def refusal(exc: Exception) -> str:
    """A refusal as one sentence for a channel's reply (``Not recorded: ...``)."""
    if isinstance(exc, NotPendingError):
        return f"Not recorded: this request is already {exc.request.status}."
    return f"Not recorded: {exc}."
