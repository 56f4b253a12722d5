"""A database the previous release wrote opens, migrates on start, and keeps its pending deliveries.

``data/previous-release.sqlite3`` was written by the previous release (commit
f836990) running ``serve`` with a webhook at 127.0.0.1:18766, a Slack app and
SMTP all pointed at dead ports, the reviewers alice (Slack U0ALICE, alice@)
and bob (bob@), three requests created and one approved, then SIGKILLed: its
``webhook_outbox`` (4 webhook and 4 Slack rows, 9 attempts), ``mail_outbox``
(6 mails), ``slack_users`` and ``reviewer_emails`` are all pending or linked.
The PostgreSQL test builds the same old tables, with the same rows, in a
fresh schema, and opens it with this release.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.channels.webhooks.signing import WebhookTarget, parse_secret, verify
from approval_guard.provider.store.sql.outbox_tables import OLD_TABLES
from tests.support.webhook_receiver import Receiver

RELEASE_DB = Path(__file__).parent / "data" / "previous-release.sqlite3"
SECRET = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
HOOK_PORT = 18766


def _old_rows(table: str) -> list[dict[str, Any]]:
    with sqlite3.connect(RELEASE_DB) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(f"SELECT * FROM {table}")]


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _check_moved(store: Any) -> None:
    """Every old row is in the one outbox, pending, and every link kept."""
    old_hooks = {row["id"]: row for row in _old_rows("webhook_outbox")}
    old_mail = {row["id"]: row for row in _old_rows("mail_outbox")}
    rows = {row.id: row for row in store.list_outbox()}
    assert set(old_hooks) | set(old_mail) <= set(rows)
    for item_id, old in old_hooks.items():
        row = rows[item_id]
        expected = "slack" if old["target_url"].startswith("slack:") else "webhooks"
        assert (expected, old["target_url"], old["event_type"], old["attempts"]) == (
            row.channel,
            row.target,
            row.event_type,
            row.attempts,
        )
        assert "pending" == row.state
    for item_id, old in old_mail.items():
        row = rows[item_id]
        assert ("email", old["address"], old["reviewer_id"], "pending") == (
            row.channel,
            row.target,
            row.item.reviewer_id,
            row.state,
        )
    hooks = [row for row in rows.values() if row.id in old_hooks and row.channel == "webhooks"]
    assert 9 == sum(len(row.history) for row in rows.values() if row.id in old_hooks)
    assert hooks
    (alice,) = [one for one in _old_rows("slack_users")]
    assert {alice["credential_id"]: "U0ALICE"} == store.identities("slack")
    emails = {row["credential_id"]: row["address"] for row in _old_rows("reviewer_emails")}
    assert emails == store.identities("email")
    assert "alice" == store.reviewer_by_identity("slack", "U0ALICE").name


def test_the_previous_releases_sqlite_file_migrates_and_delivers_what_was_pending(
    tmp_path: Path,
) -> None:
    """Opened by this release: old tables gone, rows moved, then delivered with the same ids."""
    path = tmp_path / "old.sqlite3"
    shutil.copy(RELEASE_DB, path)
    assert set(OLD_TABLES) - {"slack_messages", "slack_interactions"} <= _tables(path)
    store = Store(str(path))
    try:
        _check_moved(store)
    finally:
        store.close()
    assert not set(OLD_TABLES) & _tables(path)
    old_ids = {
        row["id"] for row in _old_rows("webhook_outbox") if row["target_url"] != "slack:C0OLDREL"
    }
    with Receiver(port=HOOK_PORT) as hook:
        target = WebhookTarget(hook.url, parse_secret(SECRET))
        with ProviderServer(str(path), webhooks=[target], webhook_backoff=0.05):
            got = hook.wait_for(lambda got: old_ids <= {one.id for one in got}, timeout=30)
    for delivery in got:
        verify(SECRET, delivery.headers, delivery.body)  # signed as the old release queued it
    delivered = {row.id: row.state for row in _rows(path)}
    assert {"delivered"} == {delivered[one] for one in old_ids}
    # Opening it again changes nothing: the move happens once.
    Store(str(path)).close()
    assert delivered == {row.id: row.state for row in _rows(path)}


def _rows(path: Path) -> list[Any]:
    store = Store(str(path))
    try:
        return store.list_outbox()
    finally:
        store.close()


_OLD_PG = (
    """CREATE TABLE ag_webhook_outbox (id text PRIMARY KEY, seq bigint NOT NULL,
        event_type text NOT NULL, request_id text NOT NULL, target_url text NOT NULL,
        body_format text NOT NULL, payload text NOT NULL, created_at bigint NOT NULL,
        state text NOT NULL, attempts integer NOT NULL DEFAULT 0, next_attempt_at bigint,
        last_result text, delivered_at bigint, lease_owner text,
        lease_until bigint NOT NULL DEFAULT 0)""",
    """CREATE TABLE ag_webhook_attempts (outbox_id text NOT NULL, attempt integer NOT NULL,
        at bigint NOT NULL, status_code integer, error text, next_attempt_at bigint,
        PRIMARY KEY (outbox_id, attempt))""",
    """CREATE TABLE ag_mail_outbox (id text PRIMARY KEY, seq bigint NOT NULL,
        request_id text NOT NULL, reviewer_id text NOT NULL, address text NOT NULL,
        created_at bigint NOT NULL, state text NOT NULL, attempts integer NOT NULL DEFAULT 0,
        next_attempt_at bigint, last_result text, sent_at bigint, lease_owner text,
        lease_until bigint NOT NULL DEFAULT 0)""",
    """CREATE TABLE ag_slack_users (credential_id text PRIMARY KEY, slack_user text NOT NULL,
        linked_at bigint NOT NULL)""",
    "CREATE TABLE ag_reviewer_emails (credential_id text PRIMARY KEY, address text NOT NULL)",
    """CREATE TABLE ag_slack_messages (request_id text PRIMARY KEY, channel text NOT NULL,
        ts text NOT NULL, posted_at bigint NOT NULL)""",
    "CREATE TABLE ag_slack_interactions (digest text PRIMARY KEY, at bigint NOT NULL)",
)


def test_the_previous_releases_postgresql_tables_migrate_on_open(pg_schema_dsn: str) -> None:
    """The same old tables and rows on PostgreSQL: moved into the one outbox, old tables dropped."""
    import psycopg

    Store_ = __import__("approval_guard.provider.store.postgres", fromlist=["PostgresStore"])
    store = Store_.PostgresStore(pg_schema_dsn)
    store.close()
    with psycopg.connect(pg_schema_dsn, autocommit=True) as conn:
        for statement in _OLD_PG:
            conn.execute(statement)
        for table in ("credentials", *(t for t in OLD_TABLES if t != "slack_interactions")):
            rows = _old_rows(table)
            for row in rows:
                columns = ", ".join(row)
                marks = ", ".join(["%s"] * len(row))
                conn.execute(
                    f"INSERT INTO ag_{table} ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING",
                    list(row.values()),
                )
    store = Store_.PostgresStore(pg_schema_dsn)
    try:
        _check_moved(store)
    finally:
        store.close()
    with psycopg.connect(pg_schema_dsn, autocommit=True) as conn:
        left = [
            table
            for table in OLD_TABLES
            if (conn.execute("SELECT to_regclass(%s)", (f"ag_{table}",)).fetchone() or [None])[0]
            is not None
        ]
    assert [] == left
