"""``webhooks list``: what the provider's webhook outbox holds, and how each delivery went.

::

    approval-guard webhooks list --db approvals.sqlite3
    approval-guard webhooks list --dsn postgresql://provider@db.internal/approvals --json

One line per event and target: the event, the request, the target URL (no
secret; its query string left out), the state (``pending``, ``delivered``,
``given_up``), the number of attempts, the last result and when the next
attempt is due. ``--json`` adds every attempt.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import format_timestamp
from approval_guard.cli._output import CliError, safe, say
from approval_guard.cli._serve import safe_dsn_error

#: The outbox's channels this lists: webhooks, and the Slack app's posts (as before).
WEBHOOK_CHANNELS = ("webhooks", "slack")

if TYPE_CHECKING:
    from approval_guard.provider.store.sql.outbox_rows import OutboxRow


def _item_json(row: OutboxRow, display_url: Any) -> dict[str, Any]:
    def stamp(moment: Any) -> str | None:
        return None if moment is None else format_timestamp(moment)

    item = row.item
    return {
        "webhook_id": item.id,
        "event": item.event_type,
        "request_id": item.request_id,
        "url": display_url(item.target),
        "format": item.format,
        "state": row.state,
        "attempts": item.attempts,
        "last_result": row.last_result,
        "next_attempt_at": stamp(row.next_attempt_at) if row.state == "pending" else None,
        "delivered_at": stamp(row.delivered_at),
        "history": [
            {
                "attempt": attempt.attempt,
                "at": stamp(attempt.at),
                "status_code": attempt.status_code,
                "error": attempt.error,
                "next_attempt_at": stamp(attempt.next_attempt_at),
            }
            for attempt in row.history
        ],
    }


def cmd_list(args: argparse.Namespace) -> int:
    """``webhooks list``: every outbox row, newest event first; 1 if the store cannot be read."""
    try:
        from approval_guard.provider.channels.webhooks.signing import display_url
        from approval_guard.provider.store.opening import open_store
    except ImportError as exc:  # pragma: no cover - the store needs only the core
        raise CliError(str(exc)) from None
    if args.db is not None and not Path(args.db).is_file():
        raise CliError(f"no such database file: {args.db}")
    try:
        store = open_store(db=args.db, dsn=args.dsn)
    except Exception as exc:
        where = "PostgreSQL" if args.dsn else args.db
        text = safe_dsn_error(exc, args.dsn) if args.dsn else str(exc)
        raise CliError(f"cannot open the database {where}: {text}") from None
    try:
        items = [
            _item_json(row, display_url) for row in store.list_outbox(channels=WEBHOOK_CHANNELS)
        ]
    finally:
        store.close()
    if args.json:
        print(dump_json({"webhooks": items}, indent=2), flush=True)
        return 0
    if not items:
        say("The webhook outbox is empty.")
        return 0
    header = ("EVENT", "REQUEST", "URL", "STATE", "ATTEMPTS", "LAST RESULT", "NEXT ATTEMPT")
    rows = [
        (
            item["event"],
            item["request_id"],
            item["url"],
            item["state"],
            str(item["attempts"]),
            item["last_result"] or "-",
            item["next_attempt_at"] or "-",
        )
        for item in items
    ]
    table = [[safe(str(cell)) for cell in row] for row in (header, *rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        say("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def add_webhooks_commands(sub: Any) -> None:
    """Add ``webhooks list`` to the command line's subcommands."""
    webhooks = sub.add_parser("webhooks", help="the provider's outgoing webhooks")
    commands = webhooks.add_subparsers(dest="webhooks_command", metavar="ACTION", required=True)
    list_ = commands.add_parser("list", help="every event x target: state, attempts, results")
    where = list_.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", metavar="PATH", help="the provider's SQLite file")
    where.add_argument(
        "--dsn",
        help="the provider's PostgreSQL database; leave the password out and use PGPASSWORD "
        "or ~/.pgpass",
    )
    list_.add_argument("--json", action="store_true", help="print the rows and attempts as JSON")
    list_.set_defaults(func=cmd_list)


__all__ = ["add_webhooks_commands", "cmd_list"]
