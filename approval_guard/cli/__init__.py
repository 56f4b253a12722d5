"""The ``approval-guard`` command: serve, review, demo, ledger, mcp-proxy.

::

    approval-guard serve [--db PATH] [--host HOST] [--port PORT]
    approval-guard list [--status STATUS] [--json]
    approval-guard show ID
    approval-guard approve ID [--note TEXT] [--valid-for 5m]
        [--grant-for 1h [--grant-uses N] [--grant-match NAME=CONSTRAINT ...]]
    approval-guard grants list|show ID|revoke ID|approve ID
    approval-guard deny ID --note TEXT
    approval-guard cancel ID [--reason TEXT]        (instance credential)
    approval-guard demo [--decide approve|deny] [--after 2s] [--port 0]
    approval-guard ledger show (--db PATH | --dsn DSN) [--limit N]
    approval-guard ledger prune (--db PATH | --dsn DSN) --older-than 30d
    approval-guard reviewers add NAME [--role ROLE ...] (--db PATH | --dsn DSN)
    approval-guard reviewers list|remove NAME (--db PATH | --dsn DSN)
    approval-guard agents add NAME | list | remove NAME (--db PATH | --dsn DSN)
    approval-guard audit [--since 1h] [--json] (--db PATH | --dsn DSN)
    approval-guard mcp-proxy --guard 'write_*,delete_*' [--timeout 10m] [--editable TOOL:ARG]
        [--redact TOOL:PATH] [--listen HOST:PORT] [--url URL] [--ledger PATH] -- COMMAND ARGS...

The reviewer commands talk to a running provider. They read, at call time:

==================================  ============================================
``--url`` / ``APPROVAL_GUARD_URL``  the provider (default ``http://127.0.0.1:8765``)
``--token`` /                       a *reviewer* credential: list, show, approve,
``APPROVAL_GUARD_REVIEWER_TOKEN``   deny
``--credential`` /                  an *instance* credential: ``cancel`` only, since
``APPROVAL_GUARD_CREDENTIAL``       the API lets only the credential that created a
                                    request withdraw it
==================================  ============================================

Prefer the environment variables to ``--token``: a command line is visible to
other users of the machine. Exit codes: 0 success, 1 failure, 2 usage.

The modules beside this one: ``_parser`` (every verb and option), ``_output``
(what a person reads), ``_reviewer_client`` (the API over the library's one
HTTP client), ``_review`` (list, show, approve, deny, cancel), ``_serve``,
``_demo``, ``_ledger``, ``_mcp_proxy``, ``_signals``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from approval_guard.cli._output import PROG, CliError, say
from approval_guard.cli._parser import build_parser

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``approval-guard`` command; return its exit code (0 ok, 1 failure, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): a code, not an exception
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if handler is None:
        parser.print_usage(sys.stderr)
        return 2
    try:
        return handler(args)
    except CliError as exc:
        say(f"{PROG}: error: {exc}", stream=sys.stderr)
        code: int = getattr(exc, "exit_code", 1)
        return code
    except KeyboardInterrupt:
        say(f"{PROG}: interrupted", stream=sys.stderr)
        return 1
