"""What the store keeps for Slack: reviewers' Slack users, each request's message, seen clicks.

Its own migration step (:data:`SQLITE_SCHEMA`, :data:`POSTGRES_SCHEMA`, run on
every open; ``IF NOT EXISTS`` makes it idempotent):

- ``slack_users``: a reviewer credential's Slack user id. The link is to the
  credential, not the name, so removing the reviewer (revoking it) makes the
  link refuse at once, and a later reviewer of the same name is not linked.
- ``slack_messages``: the ``channel`` and ``ts`` of the message posted for a
  request, so an update after a restart (or on another instance) finds it.
- ``slack_interactions``: the digest of each signed interaction accepted, so a
  replayed payload (same timestamp, body and signature, within Slack's five
  minutes) is recognised and does nothing.

A store given a channel for a tool (:meth:`SlackMixin.set_slack_channels`)
queues one row in the webhook outbox, in the change's own transaction, for
every change of that tool's requests: ``slack.post`` when one is created,
``slack.update`` on each approval, the decision, expiry and cancel. Its target
is ``slack:<channel>``, so the webhook deliverer never claims it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from approval_guard._codec.exact_json import canonical_json
from approval_guard.provider.channels.webhooks.signing import new_msg_id
from approval_guard.provider.store.models import REVIEWER, Credential
from approval_guard.provider.store.sql.base import (
    SQLStoreBase,
    Tx,
    credential_from_row,
    insert_audit,
    returned,
    to_us,
)
from approval_guard.provider.store.sql.credentials import ReviewerNameError

#: A Slack user id as Slack writes it: ``U0123ABC`` (or ``W...`` on Enterprise Grid).
SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,30}")
#: An outbox row's target for a Slack channel, and its body format.
TARGET_PREFIX = "slack:"
SLACK_FORMAT = "slack_app"
POST = "slack.post"
UPDATE = "slack.update"
#: The changes that post (``created``) or update the message.
_KINDS = ("created", "approval", "decided", "expired", "cancelled")
#: How long an accepted interaction's digest is kept: past Slack's five-minute window.
INTERACTION_MEMORY = timedelta(minutes=10)

SLACK_TABLES = ("slack_users", "slack_messages", "slack_interactions")

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS slack_users (
    credential_id TEXT PRIMARY KEY,
    slack_user    TEXT NOT NULL,
    linked_at     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS slack_users_by_user ON slack_users (slack_user);
CREATE TABLE IF NOT EXISTS slack_messages (
    request_id TEXT PRIMARY KEY,
    channel    TEXT NOT NULL,
    ts         TEXT NOT NULL,
    posted_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS slack_interactions (
    digest TEXT PRIMARY KEY,
    at     INTEGER NOT NULL
);
"""

POSTGRES_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ag_slack_users (
        credential_id text PRIMARY KEY,
        slack_user    text NOT NULL,
        linked_at     bigint NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ag_slack_users_by_user ON ag_slack_users (slack_user)",
    """CREATE TABLE IF NOT EXISTS ag_slack_messages (
        request_id text PRIMARY KEY,
        channel    text NOT NULL,
        ts         text NOT NULL,
        posted_at  bigint NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ag_slack_interactions (
        digest text PRIMARY KEY,
        at     bigint NOT NULL)""",
)


def check_slack_user(value: object) -> str:
    """A Slack user id (``U0123ABC``); :class:`ReviewerNameError` for anything else."""
    if not isinstance(value, str) or not SLACK_USER.fullmatch(value):
        raise ReviewerNameError(
            "a Slack user id is U or W and 2 to 30 capital letters or digits, such as U0123ABC "
            "(Slack: the person's profile, More, Copy member ID)"
        )
    return value


#: ``channel_for(tool) -> channel id | None``: where a tool's requests are posted.
ChannelFor = Callable[[str], "str | None"]


class SlackMixin(SQLStoreBase):
    """Link reviewers to Slack users; keep each request's message; queue its posts and updates."""

    _slack_channel_for: ChannelFor | None = None

    def set_slack_channels(self, channel_for: ChannelFor | None) -> None:
        """Post each later request of a tool to ``channel_for(tool)`` (None: not to Slack)."""
        self._slack_channel_for = channel_for

    def _before_commit(self, tx: Tx, events: Sequence[tuple[str, str, datetime, int]]) -> None:
        super()._before_commit(tx, events)
        channel_for = self._slack_channel_for
        if channel_for is None:
            return
        for request_id, kind, at, seq in events:
            if kind not in _KINDS:
                continue
            row = returned(tx.execute("SELECT tool FROM requests WHERE id = ?", (request_id,)))
            channel = None if row is None else channel_for(str(row[0]))
            if not channel:
                continue
            event_type = POST if kind == "created" else UPDATE
            payload = {"type": event_type, "kind": kind, "request_id": request_id}
            tx.execute(
                "INSERT INTO webhook_outbox (id, seq, event_type, request_id, target_url, "
                "body_format, payload, created_at, state, attempts, next_attempt_at, "
                "lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, 0)",
                (
                    new_msg_id(),
                    seq,
                    event_type,
                    request_id,
                    TARGET_PREFIX + channel,
                    SLACK_FORMAT,
                    canonical_json(payload),
                    to_us(at),
                    to_us(self.now()),
                ),
            )

    # ------------------------------------------------------------------ reviewers

    def link_slack_user(
        self, name: str, slack_user: str, *, source: str = "cli", actor: str = "cli"
    ) -> None:
        """Link the live reviewer ``name`` to a Slack user id (replacing an earlier link).

        :class:`ReviewerNameError` for a malformed id, no live reviewer of that
        name, or an id another live reviewer is already linked to (a click must
        name one person).
        """
        check_slack_user(slack_user)
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
            taken = returned(
                tx.execute(
                    "SELECT c.name FROM slack_users s JOIN credentials c ON c.id = s.credential_id "
                    "WHERE s.slack_user = ? AND c.revoked_at IS NULL AND c.id <> ?",
                    (slack_user, credential_id),
                )
            )
            if taken is not None:
                raise ReviewerNameError(
                    f"the Slack user {slack_user} is already linked to the reviewer {taken[0]!r}"
                )
            tx.execute("DELETE FROM slack_users WHERE credential_id = ?", (credential_id,))
            tx.execute(
                "INSERT INTO slack_users (credential_id, slack_user, linked_at) VALUES (?, ?, ?)",
                (credential_id, slack_user, to_us(now)),
            )
            insert_audit(
                tx,
                at=now,
                actor=actor,
                source=source,
                action="reviewer.linked",
                request_id=None,
                detail={"name": name, "slack_user": slack_user},
            )

    def slack_reviewer(self, slack_user: str) -> Credential | None:
        """The live reviewer linked to this Slack user id, or None (unknown, or removed)."""
        with self._reading() as db:
            row = db.execute(
                "SELECT c.* FROM slack_users s JOIN credentials c ON c.id = s.credential_id "
                "WHERE s.slack_user = ? AND c.kind = ? AND c.revoked_at IS NULL",
                (slack_user, REVIEWER),
            ).fetchone()
        return None if row is None else credential_from_row(row)

    def slack_users(self) -> dict[str, str]:
        """Each live reviewer's Slack user id, by credential id."""
        with self._reading() as db:
            rows = db.execute(
                "SELECT s.credential_id, s.slack_user FROM slack_users s "
                "JOIN credentials c ON c.id = s.credential_id WHERE c.revoked_at IS NULL"
            ).fetchall()
        return {str(row[0]): str(row[1]) for row in rows}

    # ------------------------------------------------------------------ messages

    def save_slack_message(self, request_id: str, channel: str, ts: str) -> None:
        """Remember the message posted for a request (the first one posted stays)."""
        with self._writing() as tx:
            tx.execute(
                "INSERT INTO slack_messages (request_id, channel, ts, posted_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (request_id, channel, ts, to_us(self.now())),
            )

    def slack_message(self, request_id: str) -> tuple[str, str] | None:
        """``(channel, ts)`` of the message posted for a request, or None before it is."""
        with self._reading() as db:
            row = db.execute(
                "SELECT channel, ts FROM slack_messages WHERE request_id = ?", (request_id,)
            ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    # ------------------------------------------------------------------ interactions

    def note_slack_interaction(self, digest: str) -> bool:
        """Remember a signed interaction; False when it was seen before (a replay)."""
        now = self.now()
        with self._writing() as tx:
            tx.execute(
                "DELETE FROM slack_interactions WHERE at < ?",
                (to_us(now - INTERACTION_MEMORY),),
            )
            cursor: Any = tx.execute(
                "INSERT INTO slack_interactions (digest, at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (digest, to_us(now)),
            )
            return bool(cursor.rowcount)
