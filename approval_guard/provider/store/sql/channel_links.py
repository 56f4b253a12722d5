"""Reviewers' identities on channels, what channels posted, signed links' secret and single use.

One link per (reviewer credential, channel kind): a Slack user, an address, an
phone push topic, a chat user. The link is to the credential, not the name, so
removing the reviewer makes it refuse at once, and a later reviewer of the same
name is not linked. An identity names one live reviewer of its kind at most (a
click or a link must name one person). Changing a reviewer's identity voids
what was queued for the old one (its links decide nothing, even if changed
back). Tables: :mod:`.outbox_tables`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from approval_guard.provider.channels.base import DELIVERED, PENDING_DELIVERY, VOIDED
from approval_guard.provider.store.models import REVIEWER, Credential
from approval_guard.provider.store.sql.base import (
    SQLStoreBase,
    credential_from_row,
    insert_audit,
    returned,
    to_us,
)
from approval_guard.provider.store.sql.credentials import ReviewerNameError

_SECRET_KEY = "email_link_secret"
_MAX_IDENTITY = 320
#: How long an accepted interaction's digest is kept: past the five minutes a signature lives.
INTERACTION_MEMORY = timedelta(minutes=10)


class ChannelLinksMixin(SQLStoreBase):
    """Link reviewers to channel identities; keep channels' messages; sign and use links once."""

    _link_secret: bytes | None = None

    def link_identities(
        self,
        name: str,
        links: Mapping[str, str | None],
        *,
        source: str = "cli",
        actor: str = "cli",
    ) -> None:
        """Give the live reviewer ``name`` these identities (kind -> identity; None unlinks).

        All or nothing: :class:`ReviewerNameError` when there is no live
        reviewer of that name, or an identity is another live reviewer's on
        its kind; nothing is changed then. Identities are checked for shape
        by their channel before they get here.
        """
        for kind, identity in links.items():
            if not kind or (identity is not None and not 0 < len(identity) <= _MAX_IDENTITY):
                raise ReviewerNameError(f"not an identity on {kind!r}")
        now = self.now()
        with self._writing() as tx:
            tx.lock("reviewers")
            row = returned(
                tx.execute(
                    "SELECT id FROM credentials WHERE kind = ? AND name = ? AND revoked_at IS NULL",
                    (REVIEWER, name),
                )
            )
            if row is None:
                raise ReviewerNameError(f"no live reviewer is named {name!r}")
            credential_id = str(row[0])
            for kind, identity in links.items():
                if identity is None:
                    continue
                taken = returned(
                    tx.execute(
                        "SELECT c.name FROM channel_links l "
                        "JOIN credentials c ON c.id = l.credential_id "
                        "WHERE l.kind = ? AND l.identity = ? AND c.revoked_at IS NULL "
                        "AND c.id <> ?",
                        (kind, identity, credential_id),
                    )
                )
                if taken is not None:
                    raise ReviewerNameError(
                        f"{identity} on {kind} is already linked to another live reviewer, "
                        f"{taken[0]!r}"
                    )
            for kind, identity in links.items():
                before = returned(
                    tx.execute(
                        "SELECT identity FROM channel_links WHERE credential_id = ? AND kind = ?",
                        (credential_id, kind),
                    )
                )
                if before is not None and before[0] != identity:
                    # What went to the old identity keeps no power over this reviewer.
                    tx.execute(
                        "UPDATE outbox SET state = ?, lease_owner = NULL WHERE reviewer_id = ? "
                        "AND channel = ? AND state IN (?, ?)",
                        (VOIDED, credential_id, kind, PENDING_DELIVERY, DELIVERED),
                    )
                tx.execute(
                    "DELETE FROM channel_links WHERE credential_id = ? AND kind = ?",
                    (credential_id, kind),
                )
                if identity is not None:
                    tx.execute(
                        "INSERT INTO channel_links (credential_id, kind, identity, linked_at) "
                        "VALUES (?, ?, ?, ?)",
                        (credential_id, kind, identity, to_us(now)),
                    )
                insert_audit(
                    tx,
                    at=now,
                    actor=actor,
                    source=source,
                    action="reviewer.linked",
                    request_id=None,
                    detail={"name": name, "channel": kind, "identity": identity},
                )

    def link_identity(
        self, name: str, kind: str, identity: str | None, *, source: str = "cli", actor: str = "cli"
    ) -> None:
        """:meth:`link_identities` for one kind."""
        self.link_identities(name, {kind: identity}, source=source, actor=actor)

    def reviewer_by_identity(self, kind: str, identity: str) -> Credential | None:
        """The live reviewer linked to ``identity`` on ``kind``, or None (unknown, or removed)."""
        with self._reading() as db:
            row = db.execute(
                "SELECT c.* FROM channel_links l JOIN credentials c ON c.id = l.credential_id "
                "WHERE l.kind = ? AND l.identity = ? AND c.kind = ? AND c.revoked_at IS NULL",
                (kind, identity, REVIEWER),
            ).fetchone()
        return None if row is None else credential_from_row(row)

    def identities(self, kind: str) -> dict[str, str]:
        """Each live reviewer's identity on ``kind``, by credential id (unlinked left out)."""
        with self._reading() as db:
            rows = db.execute(
                "SELECT l.credential_id, l.identity FROM channel_links l "
                "JOIN credentials c ON c.id = l.credential_id "
                "WHERE l.kind = ? AND c.revoked_at IS NULL ORDER BY c.created_at, c.id",
                (kind,),
            ).fetchall()
        return {str(row[0]): str(row[1]) for row in rows}

    # ------------------------------------------------------------------ messages

    def keep_channel_message(self, channel: str, request_id: str, ref: str) -> None:
        """Remember what ``channel`` posted for a request (the first one kept stays)."""
        with self._writing() as tx:
            tx.execute(
                "INSERT INTO channel_messages (channel, request_id, ref, posted_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (channel, request_id, ref, to_us(self.now())),
            )

    def channel_message(self, channel: str, request_id: str) -> str | None:
        """What ``channel`` posted for a request, or None before it did."""
        with self._reading() as db:
            row = db.execute(
                "SELECT ref FROM channel_messages WHERE channel = ? AND request_id = ?",
                (channel, request_id),
            ).fetchone()
        return None if row is None else str(row[0])

    # ------------------------------------------------------------------ signed links

    def link_secret(self) -> bytes:
        """The database's key for signing links (made on first use, shared by instances)."""
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

    def note_interaction(self, digest: str) -> bool:
        """Remember a signed interaction; False when it was seen before (a replay)."""
        now = self.now()
        with self._writing() as tx:
            tx.execute(
                "DELETE FROM seen_interactions WHERE at < ?",
                (to_us(now - INTERACTION_MEMORY),),
            )
            cursor: Any = tx.execute(
                "INSERT INTO seen_interactions (digest, at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (digest, to_us(now)),
            )
            return bool(cursor.rowcount)

    def link_used(self, link_id: str) -> bool:
        """True once a decision was recorded with this link (see ``decide(use_once=)``)."""
        with self._reading() as db:
            row = db.execute("SELECT 1 FROM used_links WHERE link_id = ?", (link_id,)).fetchone()
        return row is not None
