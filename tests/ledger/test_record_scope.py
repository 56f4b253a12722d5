"""Whose claim is whose: one execution record per process, shared by every Guard in it,
and one per provider (however its URL is spelled), so two providers' ids never collide.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.wire import format_timestamp
from approval_guard._ledger.scoped import provider_scope as _provider_scope
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard, refund_tool
from tests.support.serving import BurstServer, serve_in_thread

GUARDS = 100


def test_a_guard_per_session_still_runs_one_approved_call_once() -> None:
    """100 Guards (one per session) retrying one key: the approved call runs once, not 100 times."""
    ran: list[Any] = []
    with (
        LocalProvider(policy=approve_after(0)) as provider,
        ag.harness_call(idempotency_key="toolcall-one-per-session", limit="1m"),
    ):
        outcomes = [
            refund_tool(make_guard(provider), ran)("payment_1", 4900) for _ in range(GUARDS)
        ]
        assert 1 == len(provider.requests())
    assert [("payment_1", 4900, "GBP")] == ran
    reasons = [out.reason for out in outcomes if isinstance(out, ag.NotRun)]
    assert [ag.Reason.ALREADY_EXECUTED] * (GUARDS - 1) == reasons


class _SameIdProvider:
    """A real HTTP provider that calls every request ``1`` and approves it at once."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                now = datetime.now(timezone.utc)
                answer = {
                    "id": "1",
                    "tool": body["tool"],
                    "arguments": body["arguments"],
                    "timeout": body["timeout"],
                    "status": "approved",
                    "created_at": format_timestamp(now),
                    "deadline_at": format_timestamp(now + timedelta(minutes=30)),
                    "decision": {
                        "status": "approved",
                        "note": None,
                        "decided_at": format_timestamp(now),
                        "expires_at": format_timestamp(now + timedelta(minutes=5)),
                    },
                }
                data = json.dumps(answer).encode()
                owner.creates += 1
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()  # send_response wrote Date (one Date, as HTTP has it)
                self.wfile.write(data)

        self.creates = 0
        self.server = BurstServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def same_id_providers() -> Iterator[tuple[_SameIdProvider, _SameIdProvider]]:
    first, second = _SameIdProvider(), _SameIdProvider()
    yield first, second
    first.close()
    second.close()


def test_two_providers_using_one_request_id_do_not_share_a_claim(
    same_id_providers: tuple[_SameIdProvider, _SameIdProvider],
) -> None:
    """Two providers both approving request ``1``: each call runs (the record is per provider)."""
    ran: list[str] = []
    for provider in same_id_providers:
        guard = ag.Guard(
            base_url=provider.url,
            credential="cred-1",
            harness_limit="1m",
            poll_wait="1s",
            return_margin="1s",
            deadline_margin="1s",
        )

        @guard.requires_approval(timeout="30s")
        def send(to: str) -> str:
            ran.append(to)
            return to

        assert provider.url == send(provider.url)
        assert 1 == provider.creates
        assert "finished" == guard.ledger.get("1").state  # type: ignore[union-attr]
    assert [p.url for p in same_id_providers] == ran


# Found in the adversarial review of the guard side (what it does with answers).
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("http://localhost:{port}", "http://LOCALHOST.:{port}/"),
        ("http://[::1]:{port}", "http://[0:0:0:0:0:0:0:1]:{port}"),
    ],
)
def test_one_provider_spelled_two_ways_shares_one_record(first: str, second: str) -> None:
    """A host's trailing dot or an address's long form is the same provider: one claim."""
    assert _provider_scope(first.format(port=8080)) == _provider_scope(second.format(port=8080))
