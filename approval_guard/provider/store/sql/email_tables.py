"""The email channel's tables, one migration step for both databases: addresses, mail, used links.

- ``reviewer_emails``: a named reviewer's address (``reviewers add --email``),
  one per reviewer credential, kept lower-cased for comparison.
- ``mail_outbox``: one row per (new request, recipient), written in the
  create's own transaction, so a crash or restart loses no mail; a sender
  claims due rows with a lease, as the webhook outbox does. No link token is
  stored: the sender signs the links when it sends.
- ``used_links``: the id of every email link that decided, inserted in the
  decision's own transaction, so a link decides at most once.

The link-signing secret is a row of ``meta`` (``email_link_secret``), made
once per database, so every instance on one PostgreSQL database signs alike.
Applied on every open after the store's own schema (``CREATE ... IF NOT
EXISTS``); the PostgreSQL tables are prefixed ``ag_`` like the others.
"""

from __future__ import annotations

#: The tables this step adds (the PostgreSQL backend prefixes each name).
TABLES = ("reviewer_emails", "mail_outbox", "used_links")

SQLITE = """
CREATE TABLE IF NOT EXISTS reviewer_emails (
    credential_id TEXT PRIMARY KEY,
    address       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS mail_outbox (
    id              TEXT PRIMARY KEY,
    seq             INTEGER NOT NULL,
    request_id      TEXT NOT NULL,
    reviewer_id     TEXT NOT NULL,
    address         TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    state           TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    last_result     TEXT,
    sent_at         INTEGER,
    lease_owner     TEXT,
    lease_until     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS mail_outbox_due ON mail_outbox (state, next_attempt_at);
CREATE TABLE IF NOT EXISTS used_links (
    link_id    TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    used_at    INTEGER NOT NULL
);
"""

POSTGRES = (
    """CREATE TABLE IF NOT EXISTS ag_reviewer_emails (
        credential_id text PRIMARY KEY,
        address       text NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ag_mail_outbox (
        id              text PRIMARY KEY,
        seq             bigint NOT NULL,
        request_id      text NOT NULL,
        reviewer_id     text NOT NULL,
        address         text NOT NULL,
        created_at      bigint NOT NULL,
        state           text NOT NULL,
        attempts        integer NOT NULL DEFAULT 0,
        next_attempt_at bigint,
        last_result     text,
        sent_at         bigint,
        lease_owner     text,
        lease_until     bigint NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS ag_mail_outbox_due ON ag_mail_outbox (state, next_attempt_at)",
    """CREATE TABLE IF NOT EXISTS ag_used_links (
        link_id    text PRIMARY KEY,
        request_id text NOT NULL,
        used_at    bigint NOT NULL)""",
)
