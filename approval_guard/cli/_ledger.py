"""``ledger show|prune``: look at the execution record, or trim it.

::

    approval-guard ledger show --db executions.sqlite3 --limit 20
    approval-guard ledger show --db executions.sqlite3 --json
    approval-guard ledger show --dsn postgresql://agent@db.internal/agents
    approval-guard ledger prune --db executions.sqlite3 --older-than 30d

Each handler takes the parsed arguments and returns an exit code (0 ok, 1
failure), reporting a failure itself. A row shows the digest of the arguments
that ran: its first 12 hex characters in the table, all of it in JSON.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from approval_guard._codec.duration import format_age
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import format_timestamp
from approval_guard._ledger.protocol import Execution, Ledger
from approval_guard._ledger.sqlite import SQLiteLedger
from approval_guard.cli._output import PROG, say
from approval_guard.exceptions import ApprovalGuardError

if TYPE_CHECKING:
    from approval_guard._ledger.postgres import PostgresLedger

# A row younger than this may belong to a call whose approval is still valid, or
# that is running now; deleting it would let a retry run the tool a second time.
MIN_PRUNE_AGE = timedelta(hours=1)

#: How many hex characters of the arguments' digest the table shows.
SHORT_DIGEST = 12


def _open(args: argparse.Namespace) -> SQLiteLedger | PostgresLedger:
    if args.db is not None:
        # SQLite would happily create an empty file for a mistyped path; say so instead.
        if not Path(args.db).is_file():
            raise ApprovalGuardError(f"no such ledger file: {args.db}")
        return SQLiteLedger(args.db)
    from approval_guard._ledger.postgres import PostgresLedger

    return PostgresLedger(args.dsn, table=args.table)


def _report(args: argparse.Namespace, action: Callable[[Ledger], str]) -> int:
    """Open the record ``--db``/``--dsn`` names, print what ``action`` says of it; 1 on failure."""
    try:
        ledger = _open(args)
        try:
            text = action(ledger)
        finally:
            ledger.close()
    except (ApprovalGuardError, ImportError) as exc:
        say(f"{PROG}: error: {exc}", stream=sys.stderr)
        return 1
    say(text)
    return 0


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def short_digest(digest: str | None) -> str:
    """``sha256:`` and the digest's first 12 hex characters; ``-`` for a row without one."""
    return "-" if digest is None else f"sha256:{digest[:SHORT_DIGEST]}"


def format_table(rows: Sequence[Execution]) -> str:
    """Executions as an aligned text table, one per line, under a header."""
    header = ("REQUEST ID", "TOOL", "STATE", "STARTED", "ENDED", "WORKER", "ARGS")
    lines = [header] + [
        (
            r.request_id,
            r.tool,
            r.state,
            _when(r.started_at),
            _when(r.ended_at),
            r.worker,
            short_digest(r.arguments_digest),
        )
        for r in rows
    ]
    widths = [max(len(line[col]) for line in lines) for col in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def execution_to_json(row: Execution) -> dict[str, Any]:
    """One execution as JSON: every field, timestamps in RFC 3339 UTC."""
    return {
        "request_id": row.request_id,
        "tool": row.tool,
        "state": row.state,
        "worker": row.worker,
        "started_at": format_timestamp(row.started_at),
        "ended_at": None if row.ended_at is None else format_timestamp(row.ended_at),
        "error": row.error,
        "arguments_digest": row.arguments_digest,
    }


def format_json(rows: Sequence[Execution]) -> str:
    """Executions as a JSON array, newest first; ASCII only, so safe on any terminal."""
    return dump_json([execution_to_json(row) for row in rows], indent=2, ensure_ascii=True)


def cmd_show(args: argparse.Namespace) -> int:
    """``ledger show``: the newest executions as a table, or as JSON with ``--json``."""
    # A parser without --json (one made before it existed) means the table.
    as_json = bool(getattr(args, "json", False))

    def table(ledger: Ledger) -> str:
        rows = ledger.recent(args.limit)
        if as_json:
            return format_json(rows)
        return format_table(rows) if rows else "no executions recorded"

    return _report(args, table)


def cmd_prune(args: argparse.Namespace) -> int:
    """``ledger prune``: delete old executions and say how many."""

    def prune(ledger: Ledger) -> str:
        count = ledger.prune(args.older_than)
        noun = "execution" if count == 1 else "executions"
        return f"deleted {count} {noun} older than {format_age(args.older_than)}"

    return _report(args, prune)
