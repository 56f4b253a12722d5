"""The store protocol: what the HTTP layer, the CLI and the tests may ask of any store.

:class:`~approval_guard.provider.store.sqlite.SQLiteStore` (``Store``) and
:class:`~approval_guard.provider.store.postgres.PostgresStore` both implement it; the
contract suite in ``tests/provider/store_contract`` runs against each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.provider.channels.base import Channel, Item
from approval_guard.provider.rules.config import Rules
from approval_guard.provider.store.models import (
    Annotation,
    AuditRow,
    CreateResult,
    Credential,
    FirstStartTokens,
    Grant,
    History,
    Session,
    StoredRequest,
)
from approval_guard.provider.store.sql.grant_tables import GrantSpec
from approval_guard.provider.store.sql.outbox_rows import OutboxRow
from approval_guard.provider.store.sql.waiting import WaitState


class StoreProtocol(Protocol):
    """The provider's state: credentials, sessions, requests and their change feed."""

    @property
    def path(self) -> str:
        """Where the state lives, fit to show (a file, or a DSN without its password)."""
        ...

    @property
    def closed(self) -> bool: ...

    @property
    def seq(self) -> int: ...

    @property
    def waiting_polls(self) -> int: ...

    def now(self) -> datetime: ...

    def close(self) -> None: ...

    def wake_all(self) -> None: ...

    def prune(self) -> int: ...

    # credentials and sessions
    def create_credential(
        self, kind: str, name: str, *, token: str | None = None, roles: Sequence[str] = ()
    ) -> str: ...

    def add_reviewer(
        self, name: str, *, roles: Sequence[str] = (), source: str = "cli", actor: str = "cli"
    ) -> str: ...

    def list_reviewers(self) -> list[Credential]: ...

    def remove_reviewer(self, name: str, *, source: str = "cli", actor: str = "cli") -> bool: ...

    def ensure_initial_credentials(
        self, *, instance_token: str | None = None, reviewer_token: str | None = None
    ) -> FirstStartTokens | None: ...

    def authenticate(self, token: str) -> Credential | None: ...

    def credential(self, credential_id: str) -> Credential | None: ...

    def list_credentials(self) -> list[Credential]: ...

    def revoke_credential(self, credential_id: str) -> bool: ...

    def create_session(self, reviewer: Credential) -> tuple[str, Session]: ...

    def session(self, session_id: str) -> Session | None: ...

    # requests
    def claim_key(self, owner_id: str, key: str) -> contextlib.AbstractContextManager[None]: ...

    def replay(
        self, owner: Credential, idempotency_key: str, digest: str
    ) -> StoredRequest | None: ...

    def create_request(
        self,
        *,
        owner: Credential,
        idempotency_key: str,
        tool: str,
        arguments: dict[str, Any],
        timeout_seconds: int,
        editable: Sequence[str] | None = None,
        requested_by: str | None = None,
        approvals_required: int = 1,
        source: str = "api",
        rules: Rules | None = None,
        batch: str | None = None,
        context: str | None = None,
        redacted: Sequence[str] | None = None,
    ) -> CreateResult: ...

    def get_request(
        self, request_id: str, *, owner_id: str | None = None
    ) -> StoredRequest | None: ...

    def owner_of(self, request_id: str) -> str | None: ...

    def wait_states(
        self, request_ids: Sequence[str], *, owner_id: str | None, count_poll: bool = False
    ) -> dict[str, WaitState]: ...

    def count_polls(self, request_ids: Sequence[str]) -> None: ...

    def get_requests(
        self, request_ids: Sequence[str], *, owner_id: str | None = None
    ) -> dict[str, StoredRequest]: ...

    def expire_due(self) -> datetime | None: ...

    def poll(
        self,
        request_id: str,
        *,
        viewer: Credential,
        wait: float = 0.0,
        should_stop: Callable[[], bool] | None = None,
    ) -> StoredRequest | None: ...

    def wait_for_waiting_polls(self, n: int, timeout: float) -> bool: ...

    def expecting(
        self, request_id: str, *, owner_id: str | None
    ) -> contextlib.AbstractContextManager[Callable[[], StoredRequest | None]]: ...

    # decisions
    def decide(
        self,
        request_id: str,
        *,
        reviewer: Credential,
        status: str,
        note: str | None = None,
        valid_for: float | timedelta | None = 300,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
        rules: Rules | None = None,
        source: str = "api",
        channel: str = "api",
        channel_user: str | None = None,
        use_once: str | None = None,
        grant: GrantSpec | None = None,
    ) -> StoredRequest | None: ...

    def decide_granting(
        self,
        request_id: str,
        *,
        reviewer: Credential,
        status: str,
        note: str | None = None,
        valid_for: float | timedelta | None = 300,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
        rules: Rules | None = None,
        source: str = "api",
        channel: str = "api",
        channel_user: str | None = None,
        use_once: str | None = None,
        grant: GrantSpec | None = None,
    ) -> tuple[StoredRequest | None, Grant | None]: ...

    # standing grants (sql/grants.py)
    def list_grants(self, *, include_ended: bool = False) -> list[Grant]: ...

    def get_grant(self, grant_id: str) -> Grant | None: ...

    def revoke_grant(
        self,
        grant_id: str,
        *,
        reviewer: Credential,
        note: str | None = None,
        rules: Rules | None = None,
        source: str = "api",
    ) -> Grant: ...

    def approve_grant(
        self,
        grant_id: str,
        *,
        reviewer: Credential,
        rules: Rules | None = None,
        source: str = "api",
    ) -> Grant: ...

    def pending_covered(self, grant_id: str, *, rules: Rules | None = None) -> list[str]: ...

    def apply_grant(
        self,
        grant_id: str,
        request_id: str,
        *,
        reviewer: Credential,
        rules: Rules | None = None,
        source: str = "api",
    ) -> StoredRequest: ...

    # named agents
    def add_agent(self, name: str, *, source: str = "cli", actor: str = "cli") -> str: ...

    def list_agents(self) -> list[Credential]: ...

    def remove_agent(self, name: str, *, source: str = "cli", actor: str = "cli") -> bool: ...

    def cancel(
        self,
        request_id: str,
        *,
        owner: Credential,
        reason: str | None = None,
        source: str = "api",
    ) -> StoredRequest | None: ...

    # queries
    def list_requests(
        self,
        *,
        status: str | Collection[str] | None = None,
        owner_id: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[ApprovalRequest]: ...

    def annotations(self, request_ids: Sequence[str]) -> dict[str, Annotation]: ...

    def pending_in_batch(self, request_id: str, *, limit: int) -> list[StoredRequest]: ...

    def history(self, request_id: str) -> History | None: ...

    # audit trail
    def audit(
        self, since: datetime | None = None, request_id: str | None = None
    ) -> list[AuditRow]: ...

    def record_audit(
        self,
        action: str,
        actor: str,
        source: str,
        request_id: str | None,
        detail: dict[str, Any],
    ) -> None: ...

    # change feed
    def wait_for_change(
        self, *, after: int, timeout: float, should_stop: Callable[[], bool] | None = None
    ) -> int: ...

    def subscribe(self, callback: Callable[[int, tuple[str, ...]], None]) -> Callable[[], None]: ...

    # the one outbox (sql/outbox.py)
    def set_channels(self, channels: Sequence[Channel], rules: Rules | None = None) -> None: ...

    @property
    def channels(self) -> tuple[Channel, ...]: ...

    def claim_outbox(
        self,
        *,
        owner: str,
        per_target: Mapping[str, int],
        busy: Mapping[tuple[str, str], int],
        limit: int,
        lease: float,
    ) -> list[Item]: ...

    def settle_outbox(
        self,
        item_id: str,
        *,
        owner: str,
        attempt: int,
        at: datetime,
        status_code: int | None,
        error: str | None,
        state: str,
        next_attempt_at: datetime | None,
        result: str | None = None,
    ) -> bool: ...

    def release_outbox(self, *, owner: str) -> None: ...

    def next_outbox_due(self, *, channels: Sequence[str]) -> datetime | None: ...

    def outbox_state(self, item_id: str) -> str | None: ...

    def list_outbox(
        self,
        *,
        channels: Sequence[str] | None = None,
        request_id: str | None = None,
        limit: int | None = None,
    ) -> list[OutboxRow]: ...

    # channel identities, messages, signed links (sql/channel_links.py)
    def link_identities(
        self,
        name: str,
        links: Mapping[str, str | None],
        *,
        source: str = "cli",
        actor: str = "cli",
    ) -> None: ...

    def link_identity(
        self, name: str, kind: str, identity: str | None, *, source: str = "cli", actor: str = "cli"
    ) -> None: ...

    def reviewer_by_identity(self, kind: str, identity: str) -> Credential | None: ...

    def identities(self, kind: str) -> dict[str, str]: ...

    def keep_channel_message(self, channel: str, request_id: str, ref: str) -> None: ...

    def channel_message(self, channel: str, request_id: str) -> str | None: ...

    def link_secret(self) -> bytes: ...

    def note_interaction(self, digest: str) -> bool: ...

    def link_used(self, link_id: str) -> bool: ...
