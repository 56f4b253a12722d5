"""The email channel's state: reviewers' addresses, the mail outbox, used links, the signing secret.

A store given recipients (:meth:`MailMixin.set_email`) writes one
``mail_outbox`` row per (new request, reviewer to mail) inside the create's
own transaction (:meth:`MailMixin._before_commit`), so a crash, a restart or
an SMTP outage loses no mail. Senders claim due rows with a lease (and
``FOR UPDATE SKIP LOCKED`` on PostgreSQL), as webhook deliverers do: two
instances never send one row at once, and a lease left by a killed instance
runs out. Tables: :mod:`~approval_guard.provider.store.sql.email_tables`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from approval_guard._codec.exact_json import load_stored
from approval_guard._codec.wire import PENDING
from approval_guard.provider.channels.email.addresses import check_address
from approval_guard.provider.channels.email.recipients import (
    NO_EMAIL,
    EmailRoutes,
    Reviewer,
    recipients,
)
from approval_guard.provider.store.models import REVIEWER
from approval_guard.provider.store.sql.base import (
    SQLStoreBase,
    Tx,
    from_us,
    insert_audit,
    request_from_row,
    returned,
    to_us,
)
from approval_guard.provider.store.sql.credentials import ReviewerNameError

logger = logging.getLogger("approval_guard.provider")

MAIL_PENDING = "pending"
MAIL_SENT = "sent"
#: Not sent, on purpose: the request was decided, or the reviewer removed, before it went.
MAIL_SKIPPED = "skipped"
MAIL_GIVEN_UP = "given_up"
#: The reviewer's address changed after it was queued: never sent, and its links decide nothing
#: (even once the address is changed back).
MAIL_VOIDED = "voided"
MAIL_STATES = (MAIL_PENDING, MAIL_SENT, MAIL_SKIPPED, MAIL_GIVEN_UP, MAIL_VOIDED)
_SECRET_KEY = "email_link_secret"


@attrs.frozen
class MailItem:
    """One mail of the outbox: a new request's links for one reviewer at one address."""

    id: str
    seq: int
    request_id: str
    reviewer_id: str
    address: str
    created_at: datetime
    state: str
    attempts: int
    next_attempt_at: datetime | None
    last_result: str | None
    sent_at: datetime | None


def _item(row: Any) -> MailItem:
    created = from_us(row["created_at"])
    assert created is not None
    return MailItem(
        id=row["id"],
        seq=int(row["seq"]),
        request_id=row["request_id"],
        reviewer_id=row["reviewer_id"],
        address=row["address"],
        created_at=created,
        state=row["state"],
        attempts=int(row["attempts"]),
        next_attempt_at=from_us(row["next_attempt_at"]),
        last_result=row["last_result"],
        sent_at=from_us(row["sent_at"]),
    )


_LIVE_WITH_ADDRESS = (
    "SELECT c.id, c.name, c.roles, e.address FROM credentials c "
    "JOIN reviewer_emails e ON e.credential_id = c.id "
    "WHERE c.kind = ? AND c.revoked_at IS NULL ORDER BY c.created_at, c.id"
)


def _reviewers(db: Any) -> list[Reviewer]:
    return [
        Reviewer(
            id=row["id"],
            name=row["name"],
            roles=tuple(load_stored(row["roles"])) if row["roles"] else (),
            address=row["address"],
        )
        for row in db.execute(_LIVE_WITH_ADDRESS, (REVIEWER,)).fetchall()
    ]


class MailMixin(SQLStoreBase):
    """Reviewers' addresses; queue, claim and settle mail; the links' secret and their use."""

    _email_routes: EmailRoutes = NO_EMAIL
    _link_secret: bytes | None = None

    # ------------------------------------------------------------------ addresses

    def set_reviewer_email(
        self, name: str, address: str | None, *, source: str = "cli", actor: str = "cli"
    ) -> bool:
        """Give the live reviewer ``name`` this address (None: none); False if no such reviewer.

        :class:`ReviewerNameError` when another live reviewer has the address
        (a mail's links are bound to one person); ``AddressError`` for a bad one.
        """
        checked = None if address is None else check_address(address)
        with self._writing() as tx:
            tx.lock("reviewers")
            row = returned(
                tx.execute(
                    "SELECT id FROM credentials WHERE kind = ? AND name = ? AND revoked_at IS NULL",
                    (REVIEWER, name),
                )
            )
            if row is None:
                return False
            credential_id = row[0]
            before = returned(
                tx.execute(
                    "SELECT address FROM reviewer_emails WHERE credential_id = ?", (credential_id,)
                )
            )
            if before is not None and before[0] != checked:
                # Mail already out to the old address keeps no power over this reviewer.
                tx.execute(
                    "UPDATE mail_outbox SET state = ?, lease_owner = NULL "
                    "WHERE reviewer_id = ? AND state IN (?, ?)",
                    (MAIL_VOIDED, credential_id, MAIL_PENDING, MAIL_SENT),
                )
            if checked is not None:
                taken = any(
                    one.address == checked and one.id != credential_id for one in _reviewers(tx)
                )
                if taken:
                    raise ReviewerNameError(f"another live reviewer has the address {checked}")
            tx.execute("DELETE FROM reviewer_emails WHERE credential_id = ?", (credential_id,))
            if checked is not None:
                tx.execute(
                    "INSERT INTO reviewer_emails (credential_id, address) VALUES (?, ?)",
                    (credential_id, checked),
                )
            insert_audit(
                tx,
                at=self.now(),
                actor=actor,
                source=source,
                action="reviewer.email",
                request_id=None,
                detail={"name": name, "email": checked},
            )
        return True

    def reviewer_emails(self) -> dict[str, str]:
        """Each live reviewer's address, by credential id (reviewers without one left out)."""
        with self._reading() as db:
            return {one.id: one.address for one in _reviewers(db)}

    # ------------------------------------------------------------------ links

    def email_link_secret(self) -> bytes:
        """The database's key for signing email links (made on first use, shared by instances)."""
        if self._link_secret is not None:
            return self._link_secret
        with self._reading() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (_SECRET_KEY,)).fetchone()
        if row is None:
            with self._writing() as tx:
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    (_SECRET_KEY, secrets.token_hex(32)),
                )
                row = returned(tx.execute("SELECT value FROM meta WHERE key = ?", (_SECRET_KEY,)))
        self._link_secret = bytes.fromhex(row[0])
        return self._link_secret

    def mail_voided(self, mail_id: str) -> bool:
        """Whether mail ``mail_id`` was voided: its reviewer's address changed after it was made."""
        with self._reading() as db:
            row = db.execute("SELECT state FROM mail_outbox WHERE id = ?", (mail_id,)).fetchone()
        return row is not None and row[0] == MAIL_VOIDED

    def link_used(self, link_id: str) -> bool:
        """True once a decision was recorded with this email link (see ``decide(use_once=)``)."""
        with self._reading() as db:
            row = db.execute("SELECT 1 FROM used_links WHERE link_id = ?", (link_id,)).fetchone()
        return row is not None

    # ------------------------------------------------------------------ queueing

    def set_email(self, routes: EmailRoutes) -> None:
        """Mail every later new request to the reviewers ``routes`` names for its tool."""
        self._email_routes = routes

    def _before_commit(self, tx: Tx, events: Sequence[tuple[str, str, datetime, int]]) -> None:
        """Inside a create's transaction: one mail row per reviewer to mail (then the webhooks')."""
        routes = self._email_routes
        if routes.active:
            for request_id, kind, at, seq in events:
                if kind == "created":
                    self._queue_mail(tx, routes, request_id, at, seq)
        super()._before_commit(tx, events)

    def _queue_mail(
        self, tx: Tx, routes: EmailRoutes, request_id: str, at: datetime, seq: int
    ) -> None:
        row = returned(tx.execute("SELECT * FROM requests WHERE id = ?", (request_id,)))
        if row is None:  # pragma: no cover - the change's own row
            return
        request = request_from_row(row)
        if request.status != PENDING:
            return  # a rule or a standing grant decided it as it was made: nobody to ask
        entries = routes.for_tool(request.tool)
        if not entries:
            return
        rule = routes.rules.for_tool(request.tool)
        chosen, unknown = recipients(entries, _reviewers(tx), rule.approvers)
        for address in unknown:
            logger.warning("no live reviewer has the address %s: no mail sent to it", address)
        now = to_us(self.now())
        for one in chosen:
            tx.execute(
                "INSERT INTO mail_outbox (id, seq, request_id, reviewer_id, address, "
                "created_at, state, attempts, next_attempt_at, lease_until) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, 0)",
                (
                    "mail_" + secrets.token_hex(12),
                    seq,
                    request_id,
                    one.id,
                    one.address,
                    to_us(at),
                    MAIL_PENDING,
                    now,
                ),
            )

    # ------------------------------------------------------------------ sending

    def claim_mail(self, *, owner: str, limit: int, lease: float) -> list[MailItem]:
        """Lease up to ``limit`` due mails to ``owner``, oldest first."""
        if limit < 1:
            return []
        now = to_us(self.now())
        until = to_us(self.now() + timedelta(seconds=lease))
        with self._writing() as tx:
            rows = tx.execute(
                "UPDATE mail_outbox SET lease_owner = ?, lease_until = ? "
                "WHERE state = ? AND lease_until <= ? AND id IN ("
                "SELECT id FROM mail_outbox WHERE state = ? AND next_attempt_at <= ? "
                f"AND lease_until <= ? ORDER BY seq, id LIMIT ?{self._SKIP_LOCKED}) RETURNING *",
                (owner, until, MAIL_PENDING, now, MAIL_PENDING, now, now, limit),
            ).fetchall()
        return sorted((_item(row) for row in rows), key=lambda item: (item.seq, item.id))

    def settle_mail(
        self,
        item_id: str,
        *,
        owner: str,
        attempt: int,
        at: datetime,
        result: str,
        state: str,
        next_attempt_at: datetime | None,
    ) -> bool:
        """Record an attempt and the mail's new state; False if ``owner`` lost the lease."""
        if state not in MAIL_STATES:
            raise ValueError(f"a mail state is one of {MAIL_STATES}, not {state!r}")
        with self._writing() as tx:
            row = returned(
                tx.execute(
                    "UPDATE mail_outbox SET state = ?, attempts = ?, next_attempt_at = ?, "
                    "last_result = ?, sent_at = ?, lease_owner = NULL, lease_until = 0 "
                    "WHERE id = ? AND lease_owner = ? AND state = ? RETURNING id",
                    (
                        state,
                        attempt,
                        None if next_attempt_at is None else to_us(next_attempt_at),
                        result[:300],
                        to_us(at) if state == MAIL_SENT else None,
                        item_id,
                        owner,
                        MAIL_PENDING,
                    ),
                )
            )
        return row is not None

    def release_mail(self, *, owner: str) -> None:
        """Give back every lease ``owner`` holds (a stopping sender), due again at once."""
        with self._writing() as tx:
            tx.execute(
                "UPDATE mail_outbox SET lease_owner = NULL, lease_until = 0 "
                "WHERE lease_owner = ? AND state = ?",
                (owner, MAIL_PENDING),
            )

    def next_mail_due(self) -> datetime | None:
        """When the next pending mail may be claimed (its retry, or its lease's end)."""
        with self._reading() as db:
            row = db.execute(
                "SELECT MIN(CASE WHEN lease_until > next_attempt_at THEN lease_until "
                "ELSE next_attempt_at END) FROM mail_outbox WHERE state = ?",
                (MAIL_PENDING,),
            ).fetchone()
        return from_us(None if row[0] is None else int(row[0]))

    def list_mail(self, *, request_id: str | None = None) -> list[MailItem]:
        """Every mail of the outbox (of one request), oldest first."""
        sql, params = "SELECT * FROM mail_outbox", tuple[str, ...]()
        if request_id is not None:
            sql, params = sql + " WHERE request_id = ?", (request_id,)
        with self._reading() as db:
            rows = db.execute(sql + " ORDER BY seq, id", params).fetchall()
        return [_item(row) for row in rows]
