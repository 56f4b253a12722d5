"""What the provider's store hands out: credentials, requests, sessions, audit events, its errors.

Backend-neutral: the SQLite and PostgreSQL stores both return these, and the
HTTP layer maps each :class:`StoreError` to a status code.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs

from approval_guard._codec.now import utcnow
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.exceptions import ProviderError

#: What a store's clock is: the provider's "now" as an aware datetime.
Clock = Callable[[], datetime]

INSTANCE = "instance"
REVIEWER = "reviewer"
CREDENTIAL_KINDS = (INSTANCE, REVIEWER)

#: Idempotency keys are kept at least this long (the API promises 24 hours).
KEY_RETENTION = timedelta(hours=24)
#: How long a review-page login session lasts.
SESSION_LIFETIME = timedelta(hours=12)


def system_clock() -> datetime:
    """The default clock: the system's wall time in UTC."""
    return utcnow()


# --------------------------------------------------------------------------- errors


class StoreError(ProviderError):
    """Base of the store's refusals; the HTTP layer maps each to a status code."""


class IdempotencyKeyReused(StoreError):
    """The key was used before with a different body (HTTP 422); carries the first request.

    ``request`` is the current state of the request first created with this key
    (None only if it could not be read), for the credential that created it.
    """

    def __init__(self, message: str, request: StoredRequest | None = None) -> None:
        super().__init__(message)
        self.request = request


class IdempotencyKeyInUse(StoreError):
    """The first request with this key is still being processed (HTTP 409)."""


class NotPendingError(StoreError):
    """The request is no longer pending (HTTP 409 ``not_pending``); carries its state."""

    def __init__(self, request: StoredRequest) -> None:
        super().__init__(f"request {request.id} is {request.status}, not pending")
        self.request = request


class InvalidEdit(StoreError, ValueError):
    """An ``editable`` list or a reviewer's edit the store refuses (HTTP 400)."""


class UnknownRequest(StoreError, LookupError):
    """An id given as a position (a list's ``before``) is not a request's."""


class Forbidden(StoreError):
    """This reviewer may not make this decision (HTTP 403 ``forbidden``); the message says why."""


class AlreadyApproved(StoreError):
    """This person has already approved this request (HTTP 409 ``already_approved``)."""

    def __init__(self, message: str, request: StoredRequest) -> None:
        super().__init__(message)
        self.request = request


class LinkUsed(StoreError):
    """This email link has already decided (HTTP 409 ``link_used``); a link decides once."""

    def __init__(self, message: str, request: StoredRequest) -> None:
        super().__init__(message)
        self.request = request


class ValidityTooLong(StoreError, ValueError):
    """An approval asked to stay valid beyond its tool's ``max_valid_for`` (HTTP 400)."""


class GrantRefused(StoreError, ValueError):
    """A standing grant the store refuses (HTTP 400): a scope, length or tool rule says no."""


class GrantAlreadyApproved(StoreError):
    """This person has already approved this pending grant (HTTP 409 ``already_approved``)."""


class UnknownGrant(StoreError, LookupError):
    """No grant has this id (HTTP 404)."""


class StoreClosedError(StoreError):
    """The store was closed (the server is stopping)."""


# --------------------------------------------------------------------------- models


@attrs.frozen
class Credential:
    """A credential as stored: never the token, only who it is."""

    id: str
    kind: str
    name: str
    created_at: datetime
    revoked_at: datetime | None = None
    #: A reviewer's roles (what a rules file's ``approvers`` names).
    roles: tuple[str, ...] = ()

    @property
    def is_reviewer(self) -> bool:
        return self.kind == REVIEWER


@attrs.frozen
class FirstStartTokens:
    """Plaintext tokens generated on first start; shown once, never stored.

    The ``repr`` hides them so they cannot leak into a log line by accident.
    """

    instance: str = attrs.field(repr=False)
    reviewer: str = attrs.field(repr=False)


@attrs.frozen
class Approval:
    """One person's approval of a request that needs several."""

    by: str
    at: datetime


@attrs.frozen
class StoredRequest(ApprovalRequest):
    """A request as the store keeps it: the wire model plus API 1.1's fields.

    ``editable`` is sorted (it is a set of top-level argument names); empty
    means the reviewer may change nothing. ``requested_by`` is the person the
    agent acts for; ``approvals`` the distinct approvals counted so far of the
    ``approvals_required``. API 1.3: ``batch`` names the agent's turn the call
    belongs to, ``context`` is the agent's own stated reason (shown, never
    decided on); None when the create gave none.
    """

    editable: tuple[str, ...] = ()
    requested_by: str | None = None
    approvals_required: int = 1
    approvals: tuple[Approval, ...] = ()
    #: API 1.3: the grant that decided it at its create (``decision.grant``), else None.
    decision_grant: dict[str, Any] | None = None
    batch: str | None = None
    context: str | None = None


@attrs.frozen
class Grant:
    """A standing grant (or standing denial) a reviewer gave: its scope, who, until when.

    ``match`` names every argument of ``from_request`` (``"same"`` where the
    reviewer chose nothing); ``arguments`` are that request's, what ``"same"``
    means. ``status`` is as of the store's clock when it was read.
    """

    id: str
    tool: str
    decision: str
    status: str
    match: dict[str, Any]
    arguments: dict[str, Any]
    requested_by: str
    for_requested_by: str | None
    agent: str
    agent_id: str
    granted_by: tuple[str, ...]
    granted_at: datetime
    expires_at: datetime
    uses: int | None
    uses_left: int | None
    from_request: str
    approvals_required: int = 1
    note: str | None = None


@attrs.frozen
class CreateResult:
    """What ``create_request`` did: ``created`` False means an idempotent replay."""

    request: StoredRequest
    created: bool


@attrs.frozen
class Annotation:
    """What the review page shows beside a request: its decider's name, a cancel reason.

    ``owner_id`` (the instance credential that made it) scopes a batch: two
    agents' ``"turn-1"`` are two batches.
    """

    decided_by: str | None
    cancel_reason: str | None
    owner_id: str | None = None


@attrs.frozen
class AuditEvent:
    """One entry of a request's history. ``actor`` is a credential id and name, never a token."""

    seq: int
    at: datetime
    type: str
    actor: Credential | None
    detail: dict[str, Any]


@attrs.frozen
class AuditRow:
    """One append-only audit row: who did what, when, from where, to which request.

    ``actor`` is a reviewer's or instance credential's name, or ``"system"``;
    ``source`` the client's address, ``"cli"`` or ``"system"``. Never a token.
    """

    seq: int
    at: datetime
    actor: str
    source: str
    action: str
    request_id: str | None
    detail: dict[str, Any]


@attrs.frozen
class History:
    """A request's audit trail: its events, who owns it and how often it was polled."""

    request: StoredRequest
    owner: Credential | None
    poll_count: int
    last_polled_at: datetime | None
    events: list[AuditEvent]


@attrs.frozen
class Session:
    """A review-page login session (the id itself is only known to the browser)."""

    credential: Credential
    csrf_token: str = attrs.field(repr=False)
    expires_at: datetime
