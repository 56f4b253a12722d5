"""The provider's HTTP server, by name: PROVIDER_API.md on Starlette + uvicorn.

The pieces live in their own modules: :mod:`._limits` (caps and fixed names),
:mod:`._http` (errors, answers, bodies), :mod:`._auth` (credentials, sessions,
CSRF), :mod:`._routes_api` and :mod:`._routes_page` (the endpoints),
:mod:`._waits` (async long polls), :mod:`._app` (the route table),
:mod:`._h11` (the connection protocol), :mod:`._render` (JSON forms) and
:mod:`._lifecycle` (:class:`ProviderServer`). This module re-exports them and
is the entry point of a bare provider process for tests and benchmarks::

    python -m approval_guard.provider._server --db approvals.sqlite3 --port 0 \
        [--webhook URL [--webhook-secret S] [--webhook-format F]]... [--public-url URL] \
        [--webhook-backoff SECONDS]

which prints one JSON line ``{"url": ...}`` once serving, never a token, and
stops gracefully on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from approval_guard._display import redaction_digest
from approval_guard.provider._lifecycle import ProviderServer
from approval_guard.provider._limits import (
    CONTENT_SECURITY_POLICY,
    DEFAULT_POLL_CAP,
    MAX_BODY_BYTES,
)
from approval_guard.provider._render import (
    display_json,
    history_to_json,
    input_json,
    listed_request_json,
    request_json,
)
from approval_guard.provider._store import StoreProtocol, open_store
from approval_guard.provider._webhook_settings import add_webhook_arguments, targets_from_args


def _run_from_args(argv: Sequence[str] | None = None) -> None:
    """A bare entry point for tests that need a killable provider process."""
    parser = argparse.ArgumentParser(description=_run_from_args.__doc__)
    parser.add_argument("--db", default="approvals.sqlite3")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--poll-cap", type=float, default=DEFAULT_POLL_CAP)
    parser.add_argument("--instance-token", default=None)
    parser.add_argument("--reviewer-token", default=None)
    parser.add_argument("--rules", default=None)
    parser.add_argument("--webhook-backoff", type=float, default=5.0)
    add_webhook_arguments(parser)
    args = parser.parse_args(argv)
    db: str | StoreProtocol = args.db
    if args.dsn:
        db = open_store(dsn=args.dsn)
    server = ProviderServer(
        db,
        host=args.host,
        port=args.port,
        poll_cap=args.poll_cap,
        instance_token=args.instance_token,
        reviewer_token=args.reviewer_token,
        rules=args.rules,
        webhooks=targets_from_args(args),
        public_url=args.public_url,
        webhook_backoff=args.webhook_backoff,
    )
    print(json.dumps({"url": server.url}), flush=True)
    server.serve_forever()
    if args.dsn:
        server.store.close()
    sys.stdout.flush()


__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_POLL_CAP",
    "MAX_BODY_BYTES",
    "ProviderServer",
    "display_json",
    "history_to_json",
    "input_json",
    "listed_request_json",
    "redaction_digest",
    "request_json",
]

if __name__ == "__main__":
    _run_from_args()
