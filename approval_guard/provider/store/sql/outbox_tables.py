"""The one outbox's tables, the channel links', and the step that moves an older database's rows in.

- ``outbox``: one row per item a channel sends (a webhook event for one
  target, a mail for one reviewer, a Slack post or update, a push, a chat
  message), written in the change's own transaction; claimed with a lease.
- ``outbox_attempts``: each try at sending one.
- ``channel_links``: a reviewer credential's identity on a channel (a Slack
  user, an address, a push topic, a chat user); linked to the credential,
  so removing the reviewer makes every link refuse at once.
- ``channel_messages``: what a channel posted for a request (a message id),
  so an update after a restart, or on another instance, finds it.
- ``used_links``: each signed link a decision was recorded with (single use).
- ``seen_interactions``: the digest of each signed interaction accepted (a
  Slack click or another chat's), so a replay within its five minutes does nothing.

A database made by the previous release had ``webhook_outbox`` and
``webhook_attempts`` (webhooks and Slack), ``mail_outbox`` (email),
``slack_users``, ``reviewer_emails``, ``slack_messages`` and
``slack_interactions``: :func:`migrate` copies their rows,
pending ones included, into these tables and drops them, once, in the
schema's own transaction (the same statements on SQLite and PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TABLES = (
    "outbox",
    "outbox_attempts",
    "channel_links",
    "channel_messages",
    "used_links",
    "seen_interactions",
)
#: The previous release's tables that :func:`migrate` empties into these.
OLD_TABLES = (
    "webhook_outbox",
    "webhook_attempts",
    "mail_outbox",
    "slack_users",
    "reviewer_emails",
    "slack_messages",
    "slack_interactions",
)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS outbox (
    id              TEXT PRIMARY KEY,
    seq             BIGINT NOT NULL,
    channel         TEXT NOT NULL,
    target          TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    request_id      TEXT NOT NULL,
    reviewer_id     TEXT,
    body_format     TEXT NOT NULL DEFAULT '',
    payload         TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    state           TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    last_result     TEXT,
    delivered_at    BIGINT,
    lease_owner     TEXT,
    lease_until     BIGINT NOT NULL DEFAULT 0
)""",
    "CREATE INDEX IF NOT EXISTS outbox_due ON outbox (state, next_attempt_at)",
    "CREATE INDEX IF NOT EXISTS outbox_by_request ON outbox (request_id)",
    "CREATE INDEX IF NOT EXISTS outbox_by_reviewer ON outbox (reviewer_id, channel)",
    """CREATE TABLE IF NOT EXISTS outbox_attempts (
    outbox_id       TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    at              BIGINT NOT NULL,
    status_code     INTEGER,
    error           TEXT,
    next_attempt_at BIGINT,
    PRIMARY KEY (outbox_id, attempt)
)""",
    """CREATE TABLE IF NOT EXISTS channel_links (
    credential_id TEXT NOT NULL,
    kind          TEXT NOT NULL,
    identity      TEXT NOT NULL,
    linked_at     BIGINT NOT NULL,
    PRIMARY KEY (credential_id, kind)
)""",
    "CREATE INDEX IF NOT EXISTS channel_links_by_identity ON channel_links (kind, identity)",
    """CREATE TABLE IF NOT EXISTS used_links (
    link_id    TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    used_at    BIGINT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS seen_interactions (
    digest TEXT PRIMARY KEY,
    at     BIGINT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS channel_messages (
    channel    TEXT NOT NULL,
    request_id TEXT NOT NULL,
    ref        TEXT NOT NULL,
    posted_at  BIGINT NOT NULL,
    PRIMARY KEY (channel, request_id)
)""",
)

_MOVES = {
    "webhook_outbox": (
        "INSERT INTO outbox (id, seq, channel, target, event_type, request_id, reviewer_id, "
        "body_format, payload, created_at, state, attempts, next_attempt_at, last_result, "
        "delivered_at, lease_owner, lease_until) "
        "SELECT id, seq, CASE WHEN target_url LIKE 'slack:%' THEN 'slack' ELSE 'webhooks' END, "
        "target_url, event_type, request_id, NULL, body_format, payload, created_at, state, "
        "attempts, next_attempt_at, last_result, delivered_at, NULL, 0 FROM webhook_outbox "
        "WHERE true ON CONFLICT DO NOTHING"
    ),
    "webhook_attempts": (
        "INSERT INTO outbox_attempts (outbox_id, attempt, at, status_code, error, "
        "next_attempt_at) SELECT outbox_id, attempt, at, status_code, error, next_attempt_at "
        "FROM webhook_attempts WHERE true ON CONFLICT DO NOTHING"
    ),
    "mail_outbox": (
        "INSERT INTO outbox (id, seq, channel, target, event_type, request_id, reviewer_id, "
        "body_format, payload, created_at, state, attempts, next_attempt_at, last_result, "
        "delivered_at, lease_owner, lease_until) "
        "SELECT id, seq, 'email', address, 'email.request', request_id, reviewer_id, '', '{}', "
        "created_at, CASE WHEN state = 'sent' THEN 'delivered' ELSE state END, attempts, "
        "next_attempt_at, last_result, sent_at, NULL, 0 FROM mail_outbox "
        "WHERE true ON CONFLICT DO NOTHING"
    ),
    "slack_users": (
        "INSERT INTO channel_links (credential_id, kind, identity, linked_at) "
        "SELECT credential_id, 'slack', slack_user, linked_at FROM slack_users "
        "WHERE true ON CONFLICT DO NOTHING"
    ),
    "reviewer_emails": (
        "INSERT INTO channel_links (credential_id, kind, identity, linked_at) "
        "SELECT credential_id, 'email', address, 0 FROM reviewer_emails "
        "WHERE true ON CONFLICT DO NOTHING"
    ),
    "slack_messages": (
        "INSERT INTO channel_messages (channel, request_id, ref, posted_at) "
        "SELECT 'slack', request_id, channel || ' ' || ts, posted_at FROM slack_messages "
        "WHERE true ON CONFLICT DO NOTHING"
    ),
    "slack_interactions": (
        "INSERT INTO seen_interactions (digest, at) SELECT digest, at FROM slack_interactions "
        "WHERE true ON CONFLICT DO NOTHING"
    ),
}


# ``WHERE true``: SQLite reads ``ON CONFLICT`` after a bare ``SELECT ... FROM t`` as a join's.


def migrate(execute: Callable[[str], Any], exists: Callable[[str], bool]) -> list[str]:
    """Move an older database's rows into these tables and drop the old ones; their names.

    ``execute(sql)`` runs one statement (already in the database's dialect)
    inside the schema's transaction; ``exists(table)`` says whether the old
    table is there. Idempotent: a database already moved has none of them.
    """
    moved = []
    for table in OLD_TABLES:
        if exists(table):
            execute(_MOVES[table])
            moved.append(table)
    for table in moved:
        execute(f"DROP TABLE {table}")
    return moved
