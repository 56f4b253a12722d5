"""The argument parser: every verb, its options, the handler it runs.

Environment defaults are read when the parser is built (at call time, never at
import), from the names in ``approval_guard._env``. Each leaf sets ``func``
(``Callable[[argparse.Namespace], int]``) as its default.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from datetime import timedelta

from approval_guard._codec import duration as _duration
from approval_guard._codec import wire as _wire
from approval_guard._env import (
    ENV_CREDENTIAL,
    ENV_REVIEWER_TOKEN,
    ENV_SERVE_DSN,
    ENV_SERVE_INSTANCE_TOKEN,
    ENV_SERVE_REVIEWER_TOKEN,
    ENV_URL,
)
from approval_guard.cli import _demo, _ledger, _review, _serve, _webhooks
from approval_guard.cli._grants import add_grant_options, add_grants_commands
from approval_guard.cli._mcp_proxy import add_mcp_proxy_command
from approval_guard.cli._output import PROG
from approval_guard.cli._team import add_team_commands

DEFAULT_URL = "http://127.0.0.1:8765"

_SubParsers = argparse._SubParsersAction


def _duration_arg(text: str) -> float:
    """``--after``: any canonical duration, ``0s`` included."""
    try:
        return float(_duration.parse_duration_string(text.strip()))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _valid_for_arg(text: str) -> str:
    """``--valid-for``: a positive duration, sent in canonical form."""
    try:
        return _duration.canonical(text.strip(), name="--valid-for")
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _url_arg(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r}")
    return text.rstrip("/")


def _age_arg(text: str) -> timedelta:
    """``--older-than``: an age no younger than the ledger lets anyone prune."""
    try:
        age = _duration.parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if age < _ledger.MIN_PRUNE_AGE:
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


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; environment defaults are read from ``environ`` now, at call time."""
    env = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run the local approval provider, review requests, or run the demo.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_serve(sub, env)
    _add_review_commands(sub, env)
    _add_demo(sub, env)
    add_ledger_commands(sub)
    add_team_commands(sub)
    _webhooks.add_webhooks_commands(sub)
    add_mcp_proxy_command(sub, env)
    return parser


def _add_serve(sub: _SubParsers[argparse.ArgumentParser], env: dict[str, str]) -> None:
    serve = sub.add_parser("serve", help="run the provider in the foreground")
    where = serve.add_mutually_exclusive_group()
    where.add_argument(
        "--db", default="approvals.sqlite3", help="SQLite file (default: approvals.sqlite3)"
    )
    where.add_argument(
        "--dsn",
        metavar="DSN",
        default=env.get(ENV_SERVE_DSN) or None,
        help="store everything in PostgreSQL instead (postgresql://...; needs the postgres "
        f"extra; ${ENV_SERVE_DSN}); several instances may serve one database",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=int,
        default=_serve.DEFAULT_PORT,
        help=f"port (default: {_serve.DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.add_argument(
        "--instance-token",
        metavar="T",
        default=env.get(ENV_SERVE_INSTANCE_TOKEN) or None,
        help=f"the instance credential to create on a new database (${ENV_SERVE_INSTANCE_TOKEN})",
    )
    serve.add_argument(
        "--reviewer-token",
        metavar="T",
        default=env.get(ENV_SERVE_REVIEWER_TOKEN) or None,
        help=f"the reviewer credential to create on a new database (${ENV_SERVE_REVIEWER_TOKEN})",
    )
    serve.add_argument(
        "--rules",
        metavar="FILE",
        help="per-tool review rules (TOML): approvers, approvals_required, self_approval, "
        "max_valid_for, webhooks",
    )
    serve.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this PEM certificate")
    serve.add_argument("--tls-key", metavar="FILE", help="... and this PEM private key")
    serve.add_argument(
        "--insecure-http",
        action="store_true",
        help="allow plain HTTP on an address other than loopback (behind your own TLS proxy)",
    )
    _serve.add_channel_options(serve, env)
    serve.set_defaults(func=_serve.cmd_serve)


def _add_review_commands(sub: _SubParsers[argparse.ArgumentParser], env: dict[str, str]) -> None:
    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument(
        "--url",
        type=_url_arg,
        default=env.get(ENV_URL, DEFAULT_URL),
        help=f"the provider (default: ${ENV_URL} or {DEFAULT_URL})",
    )
    reviewer = argparse.ArgumentParser(add_help=False, parents=[connection])
    reviewer.add_argument(
        "--token",
        default=env.get(ENV_REVIEWER_TOKEN),
        help=f"a reviewer credential (default: ${ENV_REVIEWER_TOKEN})",
    )

    list_ = sub.add_parser("list", parents=[reviewer], help="list requests, newest first")
    list_.add_argument("--status", choices=_wire.STATUSES, help="only requests with this status")
    list_.add_argument("--json", action="store_true", help="print the requests as JSON")
    list_.set_defaults(func=_review.cmd_list)

    show = sub.add_parser("show", parents=[reviewer], help="one request with its history")
    show.add_argument("id", help="the request id")
    show.set_defaults(func=_review.cmd_show)

    approve = sub.add_parser(
        "approve", parents=[reviewer], help="approve pending requests (one, or a turn's several)"
    )
    approve.add_argument(
        "ids",
        nargs="+",
        metavar="ID",
        help="the request id; several are decided each as if alone (POST /v1/decisions)",
    )
    approve.add_argument("--note", help="why (the agent sees it)")
    approve.add_argument(
        "--valid-for",
        type=_valid_for_arg,
        default="5m",
        help="how long the call may wait to start (default: 5m)",
    )
    approve.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=JSON",
        dest="edits",
        help="change an editable argument before approving (repeatable), e.g. amount=2500",
    )
    add_grant_options(approve, _valid_for_arg)
    approve.set_defaults(func=_review.cmd_approve)

    add_grants_commands(sub, reviewer)

    deny = sub.add_parser(
        "deny", parents=[reviewer], help="deny pending requests (one, or a turn's several)"
    )
    deny.add_argument(
        "ids",
        nargs="+",
        metavar="ID",
        help="the request id; several are decided each as if alone (POST /v1/decisions)",
    )
    deny.add_argument("--note", required=True, help="why not (the agent receives it)")
    deny.set_defaults(func=_review.cmd_deny)

    cancel = sub.add_parser(
        "cancel",
        parents=[connection],
        help="withdraw a pending request (needs the instance credential that created it)",
    )
    cancel.add_argument("id", help="the request id")
    cancel.add_argument("--reason", help="why it is withdrawn")
    cancel.add_argument(
        "--credential",
        default=env.get(ENV_CREDENTIAL),
        help=f"the instance credential that created the request (default: ${ENV_CREDENTIAL})",
    )
    cancel.set_defaults(func=_review.cmd_cancel)


def _add_demo(sub: _SubParsers[argparse.ArgumentParser], env: dict[str, str]) -> None:
    demo = sub.add_parser(
        "demo", help="run a guarded refund through a temporary provider and wait for a decision"
    )
    demo.add_argument(
        "--decide",
        choices=("approve", "deny"),
        help="decide by itself after --after, for a non-interactive run",
    )
    demo.add_argument(
        "--after", type=_duration_arg, default=2.0, help="delay before --decide acts (default: 2s)"
    )
    demo.add_argument("--port", type=int, default=0, help="port (default: 0, a free one)")
    _serve.add_slack_options(demo, env)
    demo.add_argument(
        "--slack-user",
        metavar="U...",
        help="with --slack-channel: your Slack user id, so your clicks decide as the reviewer",
    )
    demo.set_defaults(func=_demo.cmd_demo)


def add_ledger_commands(sub: _SubParsers[argparse.ArgumentParser]) -> None:
    """Add ``ledger show`` and ``ledger prune`` to a command line's subcommands."""
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

    ledger = sub.add_parser(
        "ledger", help="look at the execution record (which approved calls ran)"
    )
    commands = ledger.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)

    show = commands.add_parser("show", parents=[where], help="list recent executions, newest first")
    show.add_argument(
        "--limit", type=_limit_arg, default=50, help="how many rows to show (default: 50)"
    )
    show.add_argument("--json", action="store_true", help="print the executions as JSON")
    show.set_defaults(func=_ledger.cmd_show)

    prune = commands.add_parser("prune", parents=[where], help="delete old executions")
    prune.add_argument(
        "--older-than",
        type=_age_arg,
        required=True,
        metavar="AGE",
        help="delete rows that ended (or started) longer ago than this: 30d, 12h, 1d12h",
    )
    prune.set_defaults(func=_ledger.cmd_prune)
