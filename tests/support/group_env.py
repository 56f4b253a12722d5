"""A store under group commit, on either backend, and what other sessions see of it.

The group-commit tests that hold on both backends take ``GroupEnv``; the
queries they read with are written once, in the stores' shared dialect
(SQLite's: ``?`` markers, bare table names), and translated for PostgreSQL.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from typing import Any

from approval_guard.provider.store.models import Credential
from approval_guard.provider.store.opening import open_store
from approval_guard.provider.store.pg_schema import translate


class GroupEnv:
    """A store, its two credentials, and committed reads through a connection of the test's own."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind = kind
        self.where = where
        self.store: Any = open_store(dsn=where) if kind == "postgres" else open_store(db=where)
        owner = self.store.authenticate(self.store.create_credential("instance", "agent"))
        reviewer = self.store.authenticate(self.store.create_credential("reviewer", "alice"))
        assert owner is not None and reviewer is not None
        self.owner: Credential = owner
        self.reviewer: Credential = reviewer

    def new(self, n: int) -> list[str]:
        return [
            self.store.create_request(
                owner=self.owner,
                idempotency_key=str(uuid.uuid4()),
                tool="issue_refund",
                arguments={"i": i},
                timeout_seconds=600,
            ).request.id
            for i in range(n)
        ]

    def decide(self, request_id: str, note: str | None = None, status: str = "approved") -> str:
        done = self.store.decide(request_id, reviewer=self.reviewer, status=status, note=note)
        assert done is not None
        return str(done.status)

    def committed(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """What another session sees (committed rows only), for a query in SQLite's dialect."""
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.where, autocommit=True) as conn:
                return conn.execute(translate(sql), params).fetchall()
        with contextlib.closing(sqlite3.connect(self.where, timeout=10)) as db:
            return db.execute(sql, params).fetchall()

    def status(self, request_id: str) -> str:
        rows = self.committed("SELECT status FROM requests WHERE id = ?", (request_id,))
        return str(rows[0][0])

    def decided_events(self, request_id: str, kind: str = "decided") -> int:
        """How many events of ``kind`` the request has (committed)."""
        rows = self.committed(
            "SELECT COUNT(*) FROM events WHERE request_id = ? AND type = ?", (request_id, kind)
        )
        return int(rows[0][0])

    def in_transaction(self) -> bool:
        """Whether the writer connection is still inside a transaction."""
        if self.kind == "postgres":
            return bool(self.store._writer.in_transaction)
        return bool(self.store._db.in_transaction)

    def poison(self) -> type[BaseException]:
        """A decision noted 'poison' breaks a deferred foreign key, so the COMMIT fails.

        Returns the database's own error for it (the ``__cause__`` of ``CommitFailed``).
        """
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.where, autocommit=True) as conn:
                conn.execute("CREATE TABLE poison_parent (id integer PRIMARY KEY)")
                conn.execute(
                    "CREATE TABLE poison (parent integer "
                    "REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED)"
                )
                conn.execute(
                    "CREATE FUNCTION poison_note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "IF NEW.decision_note = 'poison' THEN INSERT INTO poison VALUES (42); END IF; "
                    "RETURN NEW; END $$"
                )
                conn.execute(
                    "CREATE TRIGGER poison_note AFTER UPDATE ON ag_requests "
                    "FOR EACH ROW EXECUTE FUNCTION poison_note()"
                )
            return psycopg.errors.ForeignKeyViolation
        self.store._db.execute("PRAGMA foreign_keys = ON")
        with self.store.transaction() as db:
            db.execute("CREATE TABLE poison_parent (id INTEGER PRIMARY KEY)")
            db.execute(
                "CREATE TABLE poison (parent INTEGER "
                "REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED)"
            )
            db.execute(
                "CREATE TRIGGER poison_note AFTER UPDATE ON requests "
                "WHEN NEW.decision_note = 'poison' BEGIN INSERT INTO poison VALUES (42); END"
            )
        return sqlite3.IntegrityError
