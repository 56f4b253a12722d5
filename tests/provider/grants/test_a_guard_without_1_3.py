"""A guard that uses nothing of API 1.3 works unchanged against a provider that serves it.

Its creates carry no 1.3 field (the bytes are pinned in tests/call/test_batch_and_context.py);
here the 1.3 provider's grants and rules decide them, and the guard runs the tool after
its one create, with no poll, as a 1.2 guard would read any create answered decided.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import approval_guard as ag
from approval_guard.provider import ProviderServer
from approval_guard.provider.rules.config import parse_rules
from tests.support.api import Api

RULES = """\
[[tools.issue_refund.auto]]
name = "tiny"
decision = "approve"
match = { amount = { max = 5 } }

[[tools.issue_refund.auto]]
name = "blocked"
decision = "deny"
match = { payment_id = { prefix = "blocked_" } }
"""


def test_grants_and_rules_decide_a_plain_guards_calls_in_one_round_trip(tmp_path: Path) -> None:
    """Rule-approved, grant-approved and rule-denied calls: one create each, never a poll."""
    ran: list[Any] = []
    with ProviderServer(str(tmp_path / "p.sqlite3"), rules=parse_rules(RULES)) as server:
        tokens = server.first_start_tokens
        assert tokens is not None
        guard = ag.Guard(
            base_url=server.url, credential=tokens.instance, harness_limit="1m",
            ledger=ag.MemoryLedger(),
        )  # fmt: skip

        @guard.requires_approval(timeout="30s")
        def issue_refund(payment_id: str, amount: int) -> int:
            ran.append((payment_id, amount))
            return amount

        assert issue_refund("p_1", 3) == 3  # the rule "tiny"
        first = Api(server.url, tokens.instance).new(
            body={"tool": "issue_refund", "arguments": {"payment_id": "p_2", "amount": 50},
                  "timeout": "30s"}
        )  # fmt: skip
        given = Api(server.url, tokens.reviewer).decide(
            first["id"], {"status": "approved", "grant": {"for": "10m"}}
        )
        assert given.status_code == 200
        assert issue_refund("p_2", 50) == 50  # the reviewer's grant
        denied = issue_refund("blocked_1", 1)  # the deny rule wins over "tiny"
        assert isinstance(denied, ag.NotRun) and denied.reason == ag.Reason.DENIED
        assert "rule" in denied.message
        assert ran == [("p_1", 3), ("p_2", 50)]
        decided = [r for r in server.store.list_requests() if r.id != first["id"]]
        assert len(decided) == 3
        for request in decided:
            history = server.store.history(request.id)
            assert history is not None and history.poll_count == 0, request.tool
            # Nothing of 1.3 comes back about a create that sent nothing of it.
            body = request_fields(server, tokens.instance, request.id)
            assert not {"batch", "context", "redacted"} & set(body)
        guard.close()


def request_fields(server: ProviderServer, token: str, request_id: str) -> dict[str, Any]:
    answer = Api(server.url, token).poll(request_id)
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()
    return result
