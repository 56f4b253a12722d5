"""The webhook outbox: events queued in the change's own transaction, claimed, and settled.

A store that was given targets (:meth:`OutboxMixin.set_webhooks`) writes one
``webhook_outbox`` row per (event, target) inside the transaction that made
the change (create, a decision that ends ``pending``, cancel, expiry), so a
crash or restart loses none: either the change and its rows commit, or
neither. A row is keyed by its ``webhook-id`` (``msg_...``), the same on every
retry; its target is named by URL, never by secret (the key stays in the
server's memory, given again at each start).

Deliverers claim due rows with a lease (``lease_owner``, ``lease_until``) and,
on PostgreSQL, ``FOR UPDATE SKIP LOCKED``: two instances never hold the same
row at once; a lease left by a killed instance runs out and the row is claimed
again. Each attempt is a ``webhook_attempts`` row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from approval_guard._codec.exact_json import canonical_json, load_stored
from approval_guard._codec.wire import PENDING
from approval_guard.provider.channels.webhooks.payloads import EVENT_TYPES, event_json
from approval_guard.provider.channels.webhooks.signing import WebhookTarget, new_msg_id
from approval_guard.provider.channels.webhooks.targets import (
    NO_ROUTES,
    WebhookRoutes,
    webhook_routes,
)
from approval_guard.provider.store.sql.base import (
    SQLStoreBase,
    Tx,
    from_us,
    request_from_row,
    returned,
    to_us,
)

PENDING_DELIVERY = "pending"
DELIVERED = "delivered"
GIVEN_UP = "given_up"
DELIVERY_STATES = (PENDING_DELIVERY, DELIVERED, GIVEN_UP)


@attrs.frozen
class WebhookAttempt:
    """One try at posting an event: when, what came back, and when the next one is due."""

    attempt: int
    at: datetime
    status_code: int | None
    error: str | None
    next_attempt_at: datetime | None

    @property
    def result(self) -> str:
        """``"HTTP 500"``, or the error (``"ConnectError: ..."``)."""
        return f"HTTP {self.status_code}" if self.status_code is not None else (self.error or "")


@attrs.frozen
class OutboxItem:
    """One event for one target, as the outbox holds it."""

    id: str
    seq: int
    event_type: str
    request_id: str
    target_url: str
    format: str
    event: dict[str, Any]
    created_at: datetime
    state: str
    attempts: int
    next_attempt_at: datetime | None
    last_result: str | None
    delivered_at: datetime | None
    history: tuple[WebhookAttempt, ...] = ()


def _item(row: Any, history: tuple[WebhookAttempt, ...] = ()) -> OutboxItem:
    created = from_us(row["created_at"])
    assert created is not None
    return OutboxItem(
        id=row["id"],
        seq=int(row["seq"]),
        event_type=row["event_type"],
        request_id=row["request_id"],
        target_url=row["target_url"],
        format=row["body_format"],
        event=load_stored(row["payload"]),
        created_at=created,
        state=row["state"],
        attempts=int(row["attempts"]),
        next_attempt_at=from_us(row["next_attempt_at"]),
        last_result=row["last_result"],
        delivered_at=from_us(row["delivered_at"]),
        history=history,
    )


def _attempt(row: Any) -> WebhookAttempt:
    at = from_us(row["at"])
    assert at is not None
    return WebhookAttempt(
        attempt=int(row["attempt"]),
        at=at,
        status_code=None if row["status_code"] is None else int(row["status_code"]),
        error=row["error"],
        next_attempt_at=from_us(row["next_attempt_at"]),
    )


def _marks(n: int) -> str:
    return ", ".join("?" * n)


class OutboxMixin(SQLStoreBase):
    """Queue webhook events with each change; claim, settle and list them."""

    _webhook_routes: WebhookRoutes = NO_ROUTES

    def set_webhooks(self, targets: Sequence[WebhookTarget] | WebhookRoutes) -> None:
        """Queue every later event for each of ``targets`` (an empty list: for none).

        :class:`WebhookRoutes` also says which targets hear only some tools'
        events (a rules file's ``webhooks``); a plain list hears every tool's.
        """
        if not isinstance(targets, WebhookRoutes):
            targets = webhook_routes(targets)
        self._webhook_routes = targets

    @property
    def webhooks(self) -> tuple[WebhookTarget, ...]:
        """The targets events are queued for (each for its tools)."""
        return self._webhook_routes.targets

    def _before_commit(self, tx: Tx, events: Sequence[tuple[str, str, datetime, int]]) -> None:
        """Inside a change's transaction: one outbox row per (event, target of its tool)."""
        routes = self._webhook_routes
        if not routes.targets:
            return
        for request_id, kind, at, seq in events:
            if kind not in EVENT_TYPES:
                continue
            row = returned(tx.execute("SELECT * FROM requests WHERE id = ?", (request_id,)))
            if row is None:  # pragma: no cover - the change's own row
                continue
            request = request_from_row(row)
            if kind == "decided" and request.status == PENDING:
                continue  # one approval of several: the request has not changed status
            targets = routes.for_tool(request.tool)
            if not targets:
                continue
            event = event_json(kind, at, request, decided_by=self._reviewer_name(tx, row))
            payload = canonical_json(event)
            now = to_us(self.now())
            for target in targets:
                tx.execute(
                    "INSERT INTO webhook_outbox (id, seq, event_type, request_id, target_url, "
                    "body_format, payload, created_at, state, attempts, next_attempt_at, "
                    "lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 0)",
                    (
                        new_msg_id(),
                        seq,
                        event["type"],
                        request_id,
                        target.url,
                        target.format,
                        payload,
                        to_us(at),
                        PENDING_DELIVERY,
                        now,
                    ),
                )

    @staticmethod
    def _reviewer_name(tx: Tx, row: Any) -> str | None:
        """Who decided, by name: every approver of a quorum (``"alice, bob"``)."""
        if row["decided_by_name"]:
            return str(row["decided_by_name"])
        decided_by = row["decided_by"]
        if decided_by is None:
            return None
        found = returned(tx.execute("SELECT name FROM credentials WHERE id = ?", (decided_by,)))
        return str(decided_by) if found is None else str(found[0])

    # ------------------------------------------------------------------ delivery

    def claim_webhooks(
        self, *, owner: str, urls: Sequence[str], limit: int, lease: float
    ) -> list[OutboxItem]:
        """Lease up to ``limit`` due rows for these target URLs to ``owner``, oldest first."""
        if not urls or limit < 1:
            return []
        now = to_us(self.now())
        until = to_us(self.now() + timedelta(seconds=lease))
        with self._writing() as tx:
            rows = tx.execute(
                "UPDATE webhook_outbox SET lease_owner = ?, lease_until = ? "
                "WHERE state = ? AND lease_until <= ? AND id IN ("
                "SELECT id FROM webhook_outbox WHERE state = ? AND next_attempt_at <= ? "
                f"AND lease_until <= ? AND target_url IN ({_marks(len(urls))}) "
                f"ORDER BY seq, target_url LIMIT ?{self._SKIP_LOCKED}) RETURNING *",
                (
                    owner,
                    until,
                    PENDING_DELIVERY,
                    now,
                    PENDING_DELIVERY,
                    now,
                    now,
                    *urls,
                    limit,
                ),
            ).fetchall()
        return sorted((_item(row) for row in rows), key=lambda item: (item.seq, item.target_url))

    def settle_webhook(
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
    ) -> bool:
        """Record one attempt and the row's new state; False if ``owner`` lost the lease."""
        if state not in DELIVERY_STATES:
            raise ValueError(f"a delivery state is one of {DELIVERY_STATES}, not {state!r}")
        result = f"HTTP {status_code}" if status_code is not None else (error or "error")
        with self._writing() as tx:
            row = returned(
                tx.execute(
                    "UPDATE webhook_outbox SET state = ?, attempts = ?, next_attempt_at = ?, "
                    "last_result = ?, delivered_at = ?, lease_owner = NULL, lease_until = 0 "
                    "WHERE id = ? AND lease_owner = ? AND state = ? RETURNING id",
                    (
                        state,
                        attempt,
                        None if next_attempt_at is None else to_us(next_attempt_at),
                        result,
                        to_us(at) if state == DELIVERED else None,
                        item_id,
                        owner,
                        PENDING_DELIVERY,
                    ),
                )
            )
            if row is None:
                return False
            tx.execute(
                "INSERT INTO webhook_attempts (outbox_id, attempt, at, status_code, error, "
                "next_attempt_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    item_id,
                    attempt,
                    to_us(at),
                    status_code,
                    error,
                    None if next_attempt_at is None else to_us(next_attempt_at),
                ),
            )
        return True

    def release_webhooks(self, *, owner: str) -> None:
        """Give back every lease ``owner`` holds (a stopping deliverer), due again at once."""
        with self._writing() as tx:
            tx.execute(
                "UPDATE webhook_outbox SET lease_owner = NULL, lease_until = 0 "
                "WHERE lease_owner = ? AND state = ?",
                (owner, PENDING_DELIVERY),
            )

    def next_webhook_due(self, *, urls: Sequence[str]) -> datetime | None:
        """When the next pending row for these URLs may be claimed (its retry or lease end)."""
        if not urls:
            return None
        with self._reading() as db:
            row = db.execute(
                "SELECT MIN(CASE WHEN lease_until > next_attempt_at THEN lease_until "
                "ELSE next_attempt_at END) FROM webhook_outbox "
                f"WHERE state = ? AND target_url IN ({_marks(len(urls))})",
                (PENDING_DELIVERY, *urls),
            ).fetchone()
        return from_us(None if row[0] is None else int(row[0]))

    def list_webhooks(self, *, limit: int | None = None) -> list[OutboxItem]:
        """Every outbox row with its attempts, newest event first."""
        sql = "SELECT * FROM webhook_outbox ORDER BY seq DESC, target_url"
        params: tuple[Any, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        with self._reading() as db:
            rows = db.execute(sql, params).fetchall()
            ids = [row["id"] for row in rows]
            attempts: dict[str, list[WebhookAttempt]] = {}
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                for found in db.execute(
                    f"SELECT * FROM webhook_attempts WHERE outbox_id IN ({_marks(len(chunk))}) "
                    "ORDER BY outbox_id, attempt",
                    chunk,
                ).fetchall():
                    attempts.setdefault(found["outbox_id"], []).append(_attempt(found))
        return [_item(row, tuple(attempts.get(row["id"], ()))) for row in rows]
