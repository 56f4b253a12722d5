"""``approval-guard ledger show|prune``: look at and trim the execution record.

::

    approval-guard ledger show --db executions.sqlite3 --limit 20
    approval-guard ledger show --dsn postgresql://agent@db.internal/agents
    approval-guard ledger prune --db executions.sqlite3 --older-than 30d

The provider's command line (``provider/_cli.py``) calls :func:`register` to add
the ``ledger`` command; each handler takes the parsed arguments and returns an
exit code (0 ok, 1 failure).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ._ledger import Execution, Ledger
from ._ledger_sqlite import SQLiteLedger
from .exceptions import ApprovalGuardError

PROG = "approval-guard"

# A row younger than this may belong to a call whose approval is still valid, or
# that is running now; deleting it would let a retry run the tool a second time.
MIN_PRUNE_AGE = timedelta(hours=1)

_AGE = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_age(text: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"1d12h"``, ``"90m"``, ``"45s"`` -> a positive timedelta.

    >>> parse_age("1d12h")
    datetime.timedelta(days=1, seconds=43200)
    """
    match = _AGE.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"not an age: {text!r} (use forms like 30d, 12h, 90m, 1d12h)")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    age = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if age <= timedelta(0):
        raise ValueError(f"the age must be positive, not {text!r}")
    return age


def format_age(age: timedelta) -> str:
    """The inverse of :func:`parse_age`: ``timedelta(days=1, hours=12)`` -> ``"1d12h"``."""
    total = int(age.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def _age_arg(text: str) -> timedelta:
    try:
        age = parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if age < MIN_PRUNE_AGE:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too young: rows younger than 1h may belong to calls whose approval "
            "is still valid, and deleting them would let a retry run the tool again"
        )
    return age


def _limit_arg(text: str) -> int:
    try:
        limit = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if limit < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {limit}")
    return limit


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ledger show`` and ``ledger prune`` to a command line's subcommands.

    Each leaf sets ``func`` (``Callable[[argparse.Namespace], int]``) as its default.
    """
    where = argparse.ArgumentParser(add_help=False)
    record = where.add_mutually_exclusive_group(required=True)
    record.add_argument("--db", metavar="PATH", help="a SQLite ledger file")
    record.add_argument(
        "--dsn",
        help="a PostgreSQL DSN; leave the password out and use PGPASSWORD or ~/.pgpass, "
        "so that it stays out of your shell history and the process list",
    )
    where.add_argument(
        "--table",
        default="approval_guard_executions",
        help="the PostgreSQL table (default: approval_guard_executions)",
    )

    ledger = subparsers.add_parser(
        "ledger", help="look at the execution record (which approved calls ran)"
    )
    commands = ledger.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)

    show = commands.add_parser("show", parents=[where], help="list recent executions, newest first")
    show.add_argument(
        "--limit", type=_limit_arg, default=50, help="how many rows to show (default: 50)"
    )
    show.set_defaults(func=cmd_show)

    prune = commands.add_parser("prune", parents=[where], help="delete old executions")
    prune.add_argument(
        "--older-than",
        type=_age_arg,
        required=True,
        metavar="AGE",
        help="delete rows that ended (or started) longer ago than this: 30d, 12h, 1d12h",
    )
    prune.set_defaults(func=cmd_prune)


def _open(args: argparse.Namespace) -> Ledger:
    if args.db is not None:
        # SQLite would happily create an empty file for a mistyped path; say so instead.
        if not Path(args.db).is_file():
            raise ApprovalGuardError(f"no such ledger file: {args.db}")
        return SQLiteLedger(args.db)
    from ._ledger_pg import PostgresLedger

    return PostgresLedger(args.dsn, table=args.table)


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def format_table(rows: Sequence[Execution]) -> str:
    """Executions as an aligned text table, one per line, under a header."""
    header = ("REQUEST ID", "TOOL", "STATE", "STARTED", "ENDED", "WORKER")
    lines = [header] + [
        (r.request_id, r.tool, r.state, _when(r.started_at), _when(r.ended_at), r.worker)
        for r in rows
    ]
    widths = [max(len(line[col]) for line in lines) for col in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _fail(exc: BaseException) -> int:
    print(f"{PROG}: error: {exc}", file=sys.stderr)
    return 1


def cmd_show(args: argparse.Namespace) -> int:
    """``ledger show``: the newest executions as a table."""
    try:
        rows = _open(args).recent(args.limit)
    except (ApprovalGuardError, ImportError) as exc:
        return _fail(exc)
    print(format_table(rows) if rows else "no executions recorded")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """``ledger prune``: delete old executions and say how many."""
    try:
        count = _open(args).prune(args.older_than)
    except (ApprovalGuardError, ImportError) as exc:
        return _fail(exc)
    noun = "execution" if count == 1 else "executions"
    print(f"deleted {count} {noun} older than {format_age(args.older_than)}")
    return 0
