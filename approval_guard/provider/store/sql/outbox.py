"""The one outbox: every channel's items queued in the change's own transaction, claimed, settled.

A store given channels (:meth:`OutboxMixin.set_channels`) tells each one, inside
the transaction that made a change (create, an approval counted, a decision,
cancel, expiry), what happened (:class:`~approval_guard.provider.channels.base.Moment`),
and writes one ``outbox`` row per item it asks for, so a crash or restart
loses none: either the change and its rows commit, or neither. A row is keyed
by its id (a webhook's ``webhook-id``), the same on every retry; it never
holds a secret (keys stay in the server's memory, given again at each start).

The worker (:mod:`~approval_guard.provider.channels.outbox`) claims due rows
with a lease (``lease_owner``, ``lease_until``), never more of one target than
its channel allows at once: two instances never hold the same row at once, and
a lease left by a killed instance runs out and the row is claimed again. Each
attempt is an ``outbox_attempts`` row. Tables: :mod:`.outbox_tables`; the
rows as listed: :mod:`.outbox_rows`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from approval_guard._codec.exact_json import canonical_json, load_stored
from approval_guard._codec.wire import PENDING
from approval_guard.provider.channels.base import MOMENTS, Item, Moment, Reviewer
from approval_guard.provider.store.models import REVIEWER
from approval_guard.provider.store.sql.base import (
    SQLStoreBase,
    Tx,
    from_us,
    request_from_row,
    returned,
    to_us,
)
from approval_guard.provider.store.sql.outbox_rows import (
    Attempt,
    OutboxRow,
    attempt_from_row,
    item_from_row,
    outbox_row,
)

if TYPE_CHECKING:
    from approval_guard.provider.channels.base import Channel
    from approval_guard.provider.rules.config import Rules

PENDING_DELIVERY = "pending"
DELIVERED = "delivered"
GIVEN_UP = "given_up"
#: Not sent, on purpose: the request was decided, or the reviewer removed, before it went.
SKIPPED = "skipped"
#: Its reviewer's identity changed after it was queued: never sent, its links decide nothing.
VOIDED = "voided"
DELIVERY_STATES = (PENDING_DELIVERY, DELIVERED, GIVEN_UP, SKIPPED, VOIDED)


def marks(n: int) -> str:
    """``?, ?, ?`` for ``n`` parameters."""
    return ", ".join("?" * n)


def new_item_id(channel: str) -> str:
    """A fresh item id: ``msg_...`` for webhooks (their ``webhook-id``), else ``<channel>_...``."""
    import secrets

    prefix = "msg" if channel == "webhooks" else channel
    return f"{prefix}_{secrets.token_hex(12)}"


class OutboxMixin(SQLStoreBase):
    """Queue every configured channel's items with each change; claim, settle and list them."""

    _channels: tuple[Channel, ...] = ()
    _channel_rules: Rules | None = None

    def set_channels(self, channels: Sequence[Channel], rules: Rules | None = None) -> None:
        """Queue every later change's items for each of ``channels`` (an empty list: for none)."""
        self._channels = tuple(channels)
        self._channel_rules = rules

    @property
    def channels(self) -> tuple[Channel, ...]:
        """The channels changes are queued for."""
        return self._channels

    def _before_commit(self, tx: Tx, events: Sequence[tuple[str, str, datetime, int]]) -> None:
        """Inside a change's transaction: each channel's items for each moment."""
        channels = self._channels
        if not channels:
            return
        from approval_guard.provider.rules.config import NO_RULES

        rules = self._channel_rules or NO_RULES
        reviewers: dict[str | None, tuple[Reviewer, ...]] = {}
        now = to_us(self.now())
        for request_id, kind, at, seq in events:
            if kind not in MOMENTS:
                continue
            row = returned(tx.execute("SELECT * FROM requests WHERE id = ?", (request_id,)))
            if row is None:  # pragma: no cover - the change's own row
                continue
            request = request_from_row(row)
            if kind == "decided" and request.status == PENDING:
                kind = "approval"  # one approval of several: the request is still pending
            decided_by = self._reviewer_name(tx, row)
            for channel in channels:
                links = channel.links
                if links not in reviewers:
                    reviewers[links] = () if links is None else _linked(tx, links)
                moment = Moment(
                    kind=kind,
                    at=at,
                    seq=seq,
                    request=request,
                    decided_by=decided_by,
                    reviewers=reviewers[links],
                    rules=rules,
                )
                for new in channel.queue(moment):
                    tx.execute(
                        "INSERT INTO outbox (id, seq, channel, target, event_type, request_id, "
                        "reviewer_id, body_format, payload, created_at, state, attempts, "
                        "next_attempt_at, lease_until) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 0)",
                        (
                            new.id or new_item_id(channel.name),
                            seq,
                            channel.name,
                            new.target,
                            new.event_type,
                            request_id,
                            new.reviewer_id,
                            new.format,
                            canonical_json(dict(new.payload)),
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

    # ------------------------------------------------------------------ the worker's part

    def claim_outbox(
        self,
        *,
        owner: str,
        per_target: Mapping[str, int],
        busy: Mapping[tuple[str, str], int],
        limit: int,
        lease: float,
    ) -> list[Item]:
        """Lease up to ``limit`` due items of these channels to ``owner``, oldest first.

        ``per_target`` is each channel's most items of one target at once;
        ``busy`` counts the items of each ``(channel, target)`` the worker is
        sending now: a target already at its most is skipped, so one slow or
        dead target never takes every slot.
        """
        if not per_target or limit < 1:
            return []
        now = to_us(self.now())
        until = to_us(self.now() + timedelta(seconds=lease))
        full = [key for key, n in busy.items() if n >= per_target.get(key[0], 1)]
        names = sorted(per_target)
        skip = "".join(" AND NOT (channel = ? AND target = ?)" for _ in full)
        with self._writing() as tx:
            rows = tx.execute(
                "SELECT id, channel, target FROM outbox WHERE state = ? AND next_attempt_at <= ? "
                f"AND lease_until <= ? AND channel IN ({marks(len(names))}){skip} "
                f"ORDER BY seq, id LIMIT ?{self._SKIP_LOCKED}",
                (
                    PENDING_DELIVERY,
                    now,
                    now,
                    *names,
                    *(part for key in full for part in key),
                    limit * 4 + 16,
                ),
            ).fetchall()
            counts = dict(busy)
            picked: list[str] = []
            for row in rows:
                key = (str(row["channel"]), str(row["target"]))
                if counts.get(key, 0) >= per_target[key[0]]:
                    continue
                counts[key] = counts.get(key, 0) + 1
                picked.append(str(row["id"]))
                if len(picked) >= limit:
                    break
            if not picked:
                return []
            claimed = tx.execute(
                "UPDATE outbox SET lease_owner = ?, lease_until = ? "
                f"WHERE id IN ({marks(len(picked))}) AND state = ? AND lease_until <= ? "
                "RETURNING *",
                (owner, until, *picked, PENDING_DELIVERY, now),
            ).fetchall()
        return sorted((item_from_row(row) for row in claimed), key=lambda one: (one.seq, one.id))

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
    ) -> bool:
        """Record one attempt and the item's new state; False if ``owner`` lost the lease."""
        if state not in DELIVERY_STATES:
            raise ValueError(f"a delivery state is one of {DELIVERY_STATES}, not {state!r}")
        if result is None:
            result = f"HTTP {status_code}" if status_code is not None else (error or "error")
        with self._writing() as tx:
            row = returned(
                tx.execute(
                    "UPDATE outbox SET state = ?, attempts = ?, next_attempt_at = ?, "
                    "last_result = ?, delivered_at = ?, lease_owner = NULL, lease_until = 0 "
                    "WHERE id = ? AND lease_owner = ? AND state = ? RETURNING id",
                    (
                        state,
                        attempt,
                        None if next_attempt_at is None else to_us(next_attempt_at),
                        result[:300],
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
                "INSERT INTO outbox_attempts (outbox_id, attempt, at, status_code, error, "
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

    def release_outbox(self, *, owner: str) -> None:
        """Give back every lease ``owner`` holds (a stopping worker), due again at once."""
        with self._writing() as tx:
            tx.execute(
                "UPDATE outbox SET lease_owner = NULL, lease_until = 0 "
                "WHERE lease_owner = ? AND state = ?",
                (owner, PENDING_DELIVERY),
            )

    def next_outbox_due(self, *, channels: Sequence[str]) -> datetime | None:
        """When the next pending item of these channels may be claimed (its retry or lease end)."""
        if not channels:
            return None
        with self._reading() as db:
            row = db.execute(
                "SELECT MIN(CASE WHEN lease_until > next_attempt_at THEN lease_until "
                "ELSE next_attempt_at END) FROM outbox "
                f"WHERE state = ? AND channel IN ({marks(len(channels))})",
                (PENDING_DELIVERY, *channels),
            ).fetchone()
        return from_us(None if row[0] is None else int(row[0]))

    def outbox_state(self, item_id: str) -> str | None:
        """An item's state (``voided`` once its reviewer's identity changed), None if unknown."""
        with self._reading() as db:
            row = db.execute("SELECT state FROM outbox WHERE id = ?", (item_id,)).fetchone()
        return None if row is None else str(row[0])

    def list_outbox(
        self,
        *,
        channels: Sequence[str] | None = None,
        request_id: str | None = None,
        limit: int | None = None,
    ) -> list[OutboxRow]:
        """Outbox rows with their attempts (of these channels, of one request), newest first."""
        where, params = [], list[Any]()
        if channels is not None:
            where.append(f"channel IN ({marks(len(channels))})")
            params.extend(channels)
        if request_id is not None:
            where.append("request_id = ?")
            params.append(request_id)
        sql = "SELECT * FROM outbox"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC, target, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._reading() as db:
            rows = db.execute(sql, params).fetchall()
            ids = [row["id"] for row in rows]
            attempts: dict[str, list[Attempt]] = {}
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                for found in db.execute(
                    f"SELECT * FROM outbox_attempts WHERE outbox_id IN ({marks(len(chunk))}) "
                    "ORDER BY outbox_id, attempt",
                    chunk,
                ).fetchall():
                    attempts.setdefault(found["outbox_id"], []).append(attempt_from_row(found))
        return [outbox_row(row, tuple(attempts.get(row["id"], ()))) for row in rows]


def _linked(db: Any, kind: str) -> tuple[Reviewer, ...]:
    """Every live reviewer, each with their identity on ``kind`` (None: not linked)."""
    rows = db.execute(
        "SELECT c.id, c.name, c.roles, l.identity FROM credentials c "
        "LEFT JOIN channel_links l ON l.credential_id = c.id AND l.kind = ? "
        "WHERE c.kind = ? AND c.revoked_at IS NULL ORDER BY c.created_at, c.id",
        (kind, REVIEWER),
    ).fetchall()
    return tuple(
        Reviewer(
            id=str(row[0]),
            name=str(row[1]),
            roles=tuple(load_stored(row[2])) if row[2] else (),
            identity=None if row[3] is None else str(row[3]),
        )
        for row in rows
    )
