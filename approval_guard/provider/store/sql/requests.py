"""Requests' lives up to a decision: create or replay, read, expire, cancel, long-poll, keys."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from approval_guard._codec.duration import format_duration
from approval_guard._codec.exact_json import InvalidJSON, canonical_json, check_json_value
from approval_guard._codec.wire import CANCELLED, EXPIRED, PENDING
from approval_guard.exceptions import ProviderError
from approval_guard.provider.rules.config import Rules
from approval_guard.provider.store.checks import body_hash, check_editable, check_redacted
from approval_guard.provider.store.ids import new_id
from approval_guard.provider.store.models import (
    KEY_RETENTION,
    CreateResult,
    Credential,
    IdempotencyKeyReused,
    NotPendingError,
    StoredRequest,
)
from approval_guard.provider.store.sql.base import (
    Reader,
    SQLStoreBase,
    from_us,
    insert_audit,
    request_from_row,
    returned,
    to_us,
)

logger = logging.getLogger("approval_guard.provider")

# A race lost to a clock that moved back is retried this often before giving up.
RACE_ATTEMPTS = 3


class _KeyTaken(ProviderError):
    """Inside a create's transaction: another create holds this key (rolls it back)."""


class RequestsMixin(SQLStoreBase):
    """Create, replay, read, expire and long-poll requests."""

    def prune(self) -> int:
        """Forget idempotency keys older than :data:`KEY_RETENTION` and dead sessions."""
        now = self.now()
        with self._writing() as tx:
            removed = tx.execute(
                "DELETE FROM idempotency_keys WHERE created_at < ?",
                (to_us(now - KEY_RETENTION),),
            ).rowcount
            tx.execute("DELETE FROM sessions WHERE expires_at <= ?", (to_us(now),))
        if removed:
            logger.info("pruned %d idempotency keys older than %s", removed, KEY_RETENTION)
        return int(removed)

    def replay(self, owner: Credential, idempotency_key: str, digest: str) -> StoredRequest | None:
        """The current state of the request this key created, or None for a new key.

        Raises :class:`IdempotencyKeyReused` when the key was used with another body.
        """
        with self._reading() as db:
            row = db.execute(
                "SELECT body_sha256, request_id FROM idempotency_keys "
                "WHERE owner_id = ? AND key = ?",
                (owner.id, idempotency_key),
            ).fetchone()
        if row is None:
            return None
        if row["body_sha256"] != digest:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was used with a different body; nothing was created",
                self._get(row["request_id"]),
            )
        return self._get(row["request_id"])

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
    ) -> CreateResult:
        """Create a pending request, or replay the one this key already made.

        The caller should hold :meth:`claim_key` around this (the HTTP layer
        does) so that a concurrent duplicate gets "in use" rather than waiting.
        Raises :class:`InvalidJSON` for a tool name or arguments the store could
        not keep exactly (see :func:`check_json_value`), and
        :class:`InvalidEdit` for ``editable`` names it refuses (see
        :func:`check_editable`); nothing is written then. ``editable`` is part
        of the body an idempotency key is bound to. Of two creates with one key
        racing (in this process or on another instance), one creates and the
        other replays it. ``requested_by`` (API 1.1, the person the agent acts
        for) is part of that body too; ``approvals_required`` (from the tool's
        rule) is kept on the request; ``source`` is where the create came from,
        for the audit trail. ``rules`` (API 1.3): a create that one of the tool's
        auto-decisions or a live standing grant covers is decided in its own
        transaction, and returned decided. ``batch`` and ``context`` (API 1.3: the agent's
        turn, its stated reason) are part of the body when given, and kept.
        """
        check_json_value(tool)
        if not isinstance(arguments, dict):
            raise InvalidJSON("the arguments must be a JSON object")
        check_json_value(arguments)
        names = check_editable(arguments, editable)
        hidden = check_redacted(arguments, redacted)
        for given in (requested_by, batch, context):
            if given is not None:
                check_json_value(given)
        if not 1 <= approvals_required <= 10:
            raise ValueError(f"approvals_required must be 1 to 10, not {approvals_required!r}")
        digest = body_hash(
            tool,
            arguments,
            timeout_seconds,
            names,
            requested_by,
            batch=batch,
            context=context,
            redacted=hidden,
        )
        existing = self.replay(owner, idempotency_key, digest)
        if existing is not None:
            return CreateResult(request=existing, created=False)
        now = self.now()
        request_id = new_id()
        deadline = now + timedelta(seconds=timeout_seconds)
        try:
            with self._writing() as tx:
                # The key first: a racing create on it waits here, then finds it taken.
                if not tx.execute(
                    "INSERT INTO idempotency_keys (owner_id, key, body_sha256, request_id, "
                    "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (owner.id, idempotency_key, digest, request_id, to_us(now)),
                ).rowcount:
                    raise _KeyTaken
                row = returned(
                    tx.execute(
                        "INSERT INTO requests (id, owner_id, idempotency_key, body_sha256, tool, "
                        "arguments, timeout, status, created_at, deadline_at, editable, "
                        "requested_by, approvals_required, batch, context, redacted) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
                        (
                            request_id,
                            owner.id,
                            idempotency_key,
                            digest,
                            tool,
                            canonical_json(arguments),
                            format_duration(timeout_seconds),
                            PENDING,
                            to_us(now),
                            to_us(deadline),
                            canonical_json(list(names)) if names else None,
                            requested_by,
                            approvals_required,
                            batch,
                            context,
                            canonical_json(list(hidden)) if hidden else None,
                        ),
                    )
                )
                request = request_from_row(row)
                detail = {"editable": list(names)} if names else {}
                tx.event(request_id, "created", now, owner.id, detail)
                insert_audit(
                    tx,
                    at=now,
                    actor=owner.name,
                    source=source,
                    action="request.created",
                    request_id=request_id,
                    detail={
                        "tool": tool,
                        "requested_by": requested_by,
                        "approvals_required": approvals_required,
                        **({"batch": batch} if batch is not None else {}),
                        **detail,
                    },
                )
                decided = self._decide_at_create(tx, request, owner, rules, source)
                if decided is not None:
                    request = request_from_row(decided)
        except _KeyTaken:
            existing = self.replay(owner, idempotency_key, digest)
            if existing is None:  # pragma: no cover - the key was pruned in between
                raise IdempotencyKeyReused(
                    "this Idempotency-Key was taken and forgotten again; nothing was created"
                ) from None
            return CreateResult(request=existing, created=False)
        logger.debug("created request %s (%s)", request_id, tool)
        return CreateResult(request=request, created=True)

    def _get(self, request_id: str, owner_id: str | None = None) -> StoredRequest | None:
        """Read one request, writing its expiry first if its deadline has passed."""
        with self._reading() as db:
            row = _select(db, request_id)
        if row is None or (owner_id is not None and row["owner_id"] != owner_id):
            return None
        if row["status"] == PENDING and row["deadline_at"] <= to_us(self.now()):
            self._expire([request_id])
            with self._reading() as db:
                row = _select(db, request_id)
        return request_from_row(row)

    def _expire(self, request_ids: list[str]) -> None:
        """Mark these overdue pending requests expired, with one audit event each, exactly once."""
        if not request_ids:
            return
        now_us = to_us(self.now())
        expired: list[tuple[str, datetime]] = []
        with self._writing() as tx:
            # Rows in one order, then the events: two instances expiring overlapping
            # sets (or one deciding meanwhile) never wait on each other in a cycle.
            for request_id in sorted(set(request_ids)):
                row = returned(
                    tx.execute(
                        "UPDATE requests SET status = ? WHERE id = ? AND status = ? "
                        "AND deadline_at <= ? RETURNING deadline_at",
                        (EXPIRED, request_id, PENDING, now_us),
                    )
                )
                if row is not None:
                    deadline = from_us(row["deadline_at"])
                    assert deadline is not None
                    expired.append((request_id, deadline))
            for request_id, deadline in expired:
                # Dated at the deadline, when it really expired, even if the server
                # was down then and only notices now.
                tx.event(request_id, "expired", deadline, None, {})
                insert_audit(
                    tx,
                    at=deadline,
                    actor="system",
                    source="system",
                    action="request.expiry",
                    request_id=request_id,
                    detail={},
                )
        if expired:
            logger.debug("expired %d request(s)", len(expired))

    def expire_due(self) -> datetime | None:
        """Expire every overdue pending request; return the next pending deadline, if any."""
        with self._reading() as db:
            due = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM requests WHERE status = ? AND deadline_at <= ?",
                    (PENDING, to_us(self.now())),
                ).fetchall()
            ]
        self._expire(due)
        with self._reading() as db:
            row = db.execute(
                "SELECT MIN(deadline_at) FROM requests WHERE status = ?", (PENDING,)
            ).fetchone()
        return from_us(row[0])

    def get_request(self, request_id: str, *, owner_id: str | None = None) -> StoredRequest | None:
        """The current state of a request (None if unknown, or not ``owner_id``'s)."""
        return self._get(request_id, owner_id)

    def owner_of(self, request_id: str) -> str | None:
        """The id of the credential that created a request, or None if unknown."""
        with self._reading() as db:
            row = db.execute("SELECT owner_id FROM requests WHERE id = ?", (request_id,)).fetchone()
        return None if row is None else str(row[0])

    def poll(
        self,
        request_id: str,
        *,
        viewer: Credential,
        wait: float = 0.0,
        should_stop: Callable[[], bool] | None = None,
    ) -> StoredRequest | None:
        """Long-poll: the request once it is not pending, or when ``wait`` seconds pass.

        An instance credential sees only its own requests (None otherwise) and
        its polls are counted in the audit trail; a reviewer sees any request.
        The wait ends early, without busy-waiting, when the request is decided
        or cancelled (woken at once, by this instance or another) or its
        deadline passes (timed wait).
        """
        owner_filter = None if viewer.is_reviewer else viewer.id
        request = self._get(request_id, owner_filter)
        if request is None:
            return None
        if not viewer.is_reviewer:
            with self._writing() as tx:
                tx.execute(
                    "UPDATE requests SET poll_count = poll_count + 1, last_polled_at = ? "
                    "WHERE id = ?",
                    (to_us(self.now()), request_id),
                )
        end = time.monotonic() + max(0.0, wait)
        while request.status == PENDING:
            remaining = end - time.monotonic()
            if remaining <= 0 or (should_stop is not None and should_stop()) or self._is_closed():
                break
            event = self._feed.register(request_id)
            try:
                # Re-read after registering: a decision committed before we
                # registered has already fired, and we must not sleep through it.
                current = self._get(request_id)
                if current is None:
                    break
                request = current
                if request.status != PENDING:
                    break
                # Checked after registering too: a stop that fired every event
                # just before we registered has set its flag already.
                if should_stop is not None and should_stop():
                    break
                to_deadline = (request.deadline_at - self.now()).total_seconds()
                # A millisecond past the deadline, so the next read sees it expired.
                event.wait(min(remaining, max(0.0, to_deadline) + 0.001))
            finally:
                self._feed.unregister(request_id, event)
            if self._is_closed():
                break
            current = self._get(request_id)
            if current is None:
                break
            request = current
        return request

    def cancel(
        self,
        request_id: str,
        *,
        owner: Credential,
        reason: str | None = None,
        source: str = "api",
    ) -> StoredRequest | None:
        """Cancel a pending request of ``owner``'s; None if unknown or not theirs.

        Cancelling a cancelled request returns it unchanged. Raises
        :class:`NotPendingError` if it was approved, denied or expired.
        """
        check_json_value(reason)
        owner_filter = None if owner.is_reviewer else owner.id
        for _ in range(RACE_ATTEMPTS):
            current = self._get(request_id, owner_filter)
            if current is None:
                return None
            if current.status == CANCELLED:
                return current
            if current.status != PENDING:
                raise NotPendingError(current)
            now = self.now()
            with self._writing() as tx:
                row = returned(
                    tx.execute(
                        "UPDATE requests SET status = ?, cancelled_at = ?, cancel_reason = ? "
                        "WHERE id = ? AND status = ? AND deadline_at > ? RETURNING *",
                        (CANCELLED, to_us(now), reason, request_id, PENDING, to_us(now)),
                    )
                )
                if row is not None:
                    tx.event(request_id, "cancelled", now, owner.id, {"reason": reason})
                    insert_audit(
                        tx,
                        at=now,
                        actor=owner.name,
                        source=source,
                        action="request.cancel",
                        request_id=request_id,
                        detail={"reason": reason},
                    )
            if row is not None:
                logger.debug("request %s cancelled", request_id)
                return request_from_row(row)
        current = self._get(request_id, owner_filter)
        if current is not None and current.status == CANCELLED:
            return current
        return self._not_pending(request_id)

    def _not_pending(self, request_id: str) -> StoredRequest | None:
        current = self._get(request_id)
        if current is None:
            return None
        raise NotPendingError(current)


def _select(db: Reader, request_id: str) -> Any:
    return db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
