"""A grant given under one rules file covers nothing a later rules file would not let it."""

from __future__ import annotations

from pathlib import Path

from approval_guard.provider import ProviderServer
from approval_guard.provider.rules.config import parse_rules
from tests.support.api import REFUND, Api


def _serve(path: Path, rules: str) -> ProviderServer:
    return ProviderServer(str(path), rules=parse_rules(rules) if rules else None)


def test_grants_turned_off_after_a_grant_was_given_cover_nothing(tmp_path: Path) -> None:
    """grants = false on a restart: the live grant neither covers a create nor applies."""
    db = tmp_path / "p.sqlite3"
    server = _serve(db, "")
    tokens = server.first_start_tokens
    assert tokens is not None
    with server:
        agent, reviewer = Api(server.url, tokens.instance), Api(server.url, tokens.reviewer)
        first = agent.new()
        given = reviewer.decide(first["id"], {"status": "approved", "grant": {"for": "1h"}})
        grant_id = given.json()["grant"]["id"]
        assert agent.new()["status"] == "approved"
        waiting = agent.new(arguments={**REFUND, "amount": 1})["id"]
    with _serve(db, "[tools.issue_refund]\ngrants = false\n") as again:
        agent, reviewer = Api(again.url, tokens.instance), Api(again.url, tokens.reviewer)
        assert agent.new()["status"] == "pending"
        answer = reviewer.session.post(
            f"{again.url}/v1/grants/{grant_id}/apply",
            json={"ids": [waiting]},
            headers=reviewer.headers(),
            timeout=10,
        ).json()
        assert answer["results"][0].get("error", {}).get("type") in ("invalid_request",)
        assert agent.poll(waiting).json()["status"] == "pending"


def test_a_giver_no_longer_allowed_by_the_rules_covers_nothing(tmp_path: Path) -> None:
    """approvers changed on a restart to a role the giver lacks: the grant covers nothing."""
    db = tmp_path / "p.sqlite3"
    server = _serve(db, "")
    tokens = server.first_start_tokens
    assert tokens is not None
    alice = server.store.add_reviewer("alice", roles=["support"])
    with server:
        agent = Api(server.url, tokens.instance)
        first = agent.new()
        given = Api(server.url, alice).decide(
            first["id"], {"status": "approved", "grant": {"for": "1h"}}
        )
        assert given.status_code == 200
        assert agent.new()["status"] == "approved"
    with _serve(db, '[tools.issue_refund]\napprovers = ["payments"]\n') as again:
        assert Api(again.url, tokens.instance).new()["status"] == "pending"
