"""Helpers of the DBOS tests: the worker script, and the keys a provider was sent."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

DBOS_WORKER = Path(__file__).resolve().with_name("dbos_worker.py")


def sent_keys(provider_db: str | Path) -> list[str]:
    """The idempotency keys a provider on a SQLite file was sent, oldest first."""
    with sqlite3.connect(provider_db) as conn:
        rows: list[Any] = conn.execute(
            "SELECT key FROM idempotency_keys ORDER BY created_at, rowid"
        ).fetchall()
    return [row[0] for row in rows]
