"""A bare provider process for tests and benchmarks that need one to kill::

    python -m approval_guard.provider.serving.process --db approvals.sqlite3 --port 0 \
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

from approval_guard.provider.channels.slack.settings import add_slack_arguments, settings_from_args
from approval_guard.provider.channels.webhooks.settings import (
    add_webhook_arguments,
    targets_from_args,
)
from approval_guard.provider.http.limits import DEFAULT_POLL_CAP
from approval_guard.provider.serving.lifecycle import ProviderServer
from approval_guard.provider.store.opening import open_store
from approval_guard.provider.store.protocol import StoreProtocol


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
    add_slack_arguments(parser, {})
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
        slack=settings_from_args(args),
    )
    print(json.dumps({"url": server.url}), flush=True)
    server.serve_forever()
    if args.dsn:
        server.store.close()
    sys.stdout.flush()


if __name__ == "__main__":
    _run_from_args()
