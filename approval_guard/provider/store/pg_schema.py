"""The PostgreSQL store's tables: creating them, and naming them in the stores' shared dialect.

The tables are prefixed ``ag_`` (beside the execution record's own) and created
on first open under ``pg_advisory_xact_lock``, so two instances opening one
empty database at once do not trip over each other; columns added since
schema 1 are added there too. Queries are written once, in SQLite's dialect
(``?`` markers, bare table names): :func:`translate` makes them PostgreSQL's.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Any

from approval_guard.provider.store.pg_group import BATCH_LOCK
from approval_guard.provider.store.sql import grant_tables, outbox_tables

_TABLES = (
    "meta",
    "credentials",
    "requests",
    "idempotency_keys",
    "events",
    "sessions",
    "approvals",
    "audit",
    *outbox_tables.TABLES,
    *outbox_tables.OLD_TABLES,
    *grant_tables.TABLES,
)
_TABLE_WORD = re.compile(r"\b(" + "|".join(_TABLES) + r")\b")
# The advisory lock held while the schema is created.
_SCHEMA_LOCK = int.from_bytes(
    hashlib.sha256(b"approval_guard.provider schema").digest()[:8], "big", signed=True
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ag_meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS ag_seq "
    "(id integer PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL)",
    "INSERT INTO ag_seq (id, seq) VALUES (1, 0) ON CONFLICT DO NOTHING",
    """CREATE TABLE IF NOT EXISTS ag_credentials (
        pos          bigserial,
        id           text PRIMARY KEY,
        kind         text NOT NULL CHECK (kind IN ('instance', 'reviewer')),
        name         text NOT NULL,
        token_sha256 text NOT NULL UNIQUE,
        created_at   bigint NOT NULL,
        revoked_at   bigint)""",
    """CREATE TABLE IF NOT EXISTS ag_requests (
        pos                bigserial,
        id                 text PRIMARY KEY,
        owner_id           text NOT NULL,
        idempotency_key    text NOT NULL,
        body_sha256        text NOT NULL,
        tool               text NOT NULL,
        arguments          text NOT NULL,
        timeout            text NOT NULL,
        status             text NOT NULL,
        created_at         bigint NOT NULL,
        deadline_at        bigint NOT NULL,
        decision_status    text,
        decision_note      text,
        decided_at         bigint,
        expires_at         bigint,
        decided_by         text,
        cancelled_at       bigint,
        cancel_reason      text,
        poll_count         bigint NOT NULL DEFAULT 0,
        last_polled_at     bigint,
        editable           text,
        decision_arguments text)""",
    "CREATE INDEX IF NOT EXISTS ag_requests_by_status ON ag_requests (status, deadline_at)",
    "CREATE INDEX IF NOT EXISTS ag_requests_by_created ON ag_requests (created_at, pos)",
    """CREATE TABLE IF NOT EXISTS ag_idempotency_keys (
        owner_id    text NOT NULL,
        key         text NOT NULL,
        body_sha256 text NOT NULL,
        request_id  text NOT NULL,
        created_at  bigint NOT NULL,
        PRIMARY KEY (owner_id, key))""",
    "CREATE INDEX IF NOT EXISTS ag_idempotency_keys_by_created ON ag_idempotency_keys (created_at)",
    """CREATE TABLE IF NOT EXISTS ag_events (
        seq        bigint PRIMARY KEY,
        request_id text NOT NULL,
        at         bigint NOT NULL,
        type       text NOT NULL,
        actor_id   text,
        detail     text)""",
    "CREATE INDEX IF NOT EXISTS ag_events_by_request ON ag_events (request_id, seq)",
    """CREATE TABLE IF NOT EXISTS ag_sessions (
        id_sha256     text PRIMARY KEY,
        credential_id text NOT NULL,
        csrf_token    text NOT NULL,
        created_at    bigint NOT NULL,
        expires_at    bigint NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ag_approvals (
        request_id  text NOT NULL,
        reviewer_id text NOT NULL,
        name        text NOT NULL,
        at          bigint NOT NULL,
        PRIMARY KEY (request_id, name))""",
    """CREATE TABLE IF NOT EXISTS ag_audit (
        seq        bigserial PRIMARY KEY,
        at         bigint NOT NULL,
        actor      text NOT NULL,
        source     text NOT NULL,
        action     text NOT NULL,
        request_id text,
        detail     text NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ag_audit_by_request ON ag_audit (request_id, seq)",
    "CREATE INDEX IF NOT EXISTS ag_audit_by_time ON ag_audit (at)",
    # Columns added since schema 1: a database made before them gets them on open
    # (under the schema lock, so two instances never race to add one).
    "ALTER TABLE ag_credentials ADD COLUMN IF NOT EXISTS roles text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS requested_by text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS approvals_required integer",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS approval_list text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS decided_by_name text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS decision_grant text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS batch text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS context text",
    "ALTER TABLE ag_requests ADD COLUMN IF NOT EXISTS redacted text",
    "INSERT INTO ag_meta (key, value) VALUES ('schema_version', '1') ON CONFLICT DO NOTHING",
)


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """A query in the stores' shared dialect (SQLite's) as PostgreSQL's: ``%s``, ``ag_`` tables."""
    return _TABLE_WORD.sub(r"ag_\1", sql.replace("%", "%%").replace("?", "%s"))


def create_schema(conn: Any) -> str:
    """Create (or bring up to date) the store's tables on ``conn``; return the schema's name."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        # Then the lock every batch begins with (pg_group.py): this DDL never waits for
        # a batch's table lock while that batch waits for one this DDL took.
        conn.execute(BATCH_LOCK)
        shared = (translate(one) for one in (*grant_tables.SCHEMA, *outbox_tables.SCHEMA))
        for statement in (*_SCHEMA, *shared):
            conn.execute(statement)

        def exists(table: str) -> bool:
            found = conn.execute("SELECT to_regclass(%s)", (translate(table),)).fetchone()
            return found[0] is not None

        outbox_tables.migrate(lambda sql: conn.execute(translate(sql)), exists)
        return str(conn.execute("SELECT current_schema()").fetchone()[0])
