"""Roles, the two-person rule, self-approval and max_valid_for, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from approval_guard._codec.wire import parse_timestamp as _parse
from tests.support.api import REFUND, error_type
from tests.support.team import RULES, Team, start_team


def parse_timestamp(text: str) -> Any:
    return _parse(text, field="t")


def _refund(t: Team, **extra: Any) -> dict[str, Any]:
    body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m", **extra}
    return t.instance.new(body=body)


@pytest.fixture(name="team")
def team_fixture(tmp_path: Path) -> Iterator[Team]:
    """A provider with :data:`RULES`; alice and bob (payments), carol (admin), dave (none)."""
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    made = start_team(str(tmp_path / "team.sqlite3"), rules)
    store = made.server.store
    for name, roles in (
        ("alice", ["payments"]),
        ("bob", ["payments", "support"]),
        ("carol", ["admin"]),
        ("dave", []),
    ):
        made.tokens[name] = store.add_reviewer(name, roles=roles)
    try:
        yield made
    finally:
        made.server.close()


def test_a_reviewer_without_the_role_is_refused_403(team: Team) -> None:
    """dave has no role; carol has another one: both get 403 forbidden saying why."""
    created = _refund(team)
    for name in ("dave", "carol"):
        refused = team.reviewer(name).decide(created["id"], {"status": "approved"})
        assert 403 == refused.status_code, refused.text
        assert "forbidden" == error_type(refused)
        assert "payments" in refused.json()["error"]["message"]
        denied = team.reviewer(name).decide(created["id"], {"status": "denied", "note": "no"})
        assert 403 == denied.status_code
    assert "pending" == team.instance.poll(created["id"]).json()["status"]


def test_two_people_must_approve_and_the_same_one_twice_does_not_count(team: Team) -> None:
    """alice approves (still pending, 1 of 2); alice again is refused; bob completes it."""
    created = _refund(team)
    assert 2 == created["approvals_required"]
    assert [] == created["approvals"]
    first = team.reviewer("alice").decide(created["id"], {"status": "approved"})
    assert 200 == first.status_code, first.text
    body = first.json()
    assert "pending" == body["status"]
    assert ["alice"] == [one["by"] for one in body["approvals"]]
    assert body.get("decision") is None
    again = team.reviewer("alice").decide(created["id"], {"status": "approved"})
    assert 409 == again.status_code, again.text
    assert "already_approved" == again.json()["error"]["type"]
    polled = team.instance.poll(created["id"]).json()
    assert "pending" == polled["status"]
    assert 1 == len(polled["approvals"])
    second = team.reviewer("bob").decide(created["id"], {"status": "approved", "valid_for": "10m"})
    assert 200 == second.status_code, second.text
    done = second.json()
    assert "approved" == done["status"]
    assert "alice, bob" == done["decision"]["decided_by"]
    assert ["alice", "bob"] == [one["by"] for one in done["approvals"]]
    decided_at = parse_timestamp(done["decision"]["decided_at"])
    assert parse_timestamp(done["approvals"][1]["at"]) == decided_at
    assert decided_at + timedelta(minutes=10) == parse_timestamp(done["decision"]["expires_at"])
    late = team.reviewer("alice").decide(created["id"], {"status": "approved"})
    assert 409 == late.status_code and "not_pending" == late.json()["error"]["type"]


def test_one_denial_denies_at_once_and_names_the_denier(team: Team) -> None:
    """After alice's approval, bob's denial ends it: denied, decided_by bob, in the audit."""
    created = _refund(team)
    team.reviewer("alice").decide(created["id"], {"status": "approved"})
    denied = team.reviewer("bob").decide(created["id"], {"status": "denied", "note": "too much"})
    assert 200 == denied.status_code, denied.text
    assert "denied" == denied.json()["status"]
    assert "bob" == denied.json()["decision"]["decided_by"]
    rows = team.server.store.audit(request_id=created["id"])
    assert ["request.created", "request.approval", "request.denial"] == [r.action for r in rows]
    assert "bob" == rows[-1].actor
    assert "127.0.0.1" == rows[-1].source
    assert "1 of 2" == rows[1].detail["approvals"]
    assert "alice" == rows[1].actor


def test_the_requester_may_not_approve_their_own_request(team: Team) -> None:
    """self_approval = false: requested_by alice may not approve; a denial of her own is fine."""
    created = _refund(team, requested_by="alice")
    assert "alice" == created["requested_by"]
    refused = team.reviewer("alice").decide(created["id"], {"status": "approved"})
    assert 403 == refused.status_code, refused.text
    assert "forbidden" == error_type(refused)
    assert "themselves" in refused.json()["error"]["message"]
    # A denial by the requester is allowed (only approving oneself is refused).
    other = team.instance.new(
        body={
            "tool": "delete_user",
            "arguments": {"id": 1},
            "timeout": "30m",
            "requested_by": "carol",
        }
    )
    assert 403 == team.reviewer("carol").decide(other["id"], {"status": "approved"}).status_code
    assert 200 == team.reviewer("carol").decide(other["id"], {"status": "denied"}).status_code


def test_requested_by_is_part_of_the_idempotency_body(team: Team) -> None:
    """The same key with another requested_by is 422; with the same one, a replay."""
    body = {"tool": "other", "arguments": {}, "timeout": "30m", "requested_by": "eve"}
    first = team.instance.create(body=body, key="k-1")
    assert 201 == first.status_code
    assert 200 == team.instance.create(body=body, key="k-1").status_code
    changed = team.instance.create(body={**body, "requested_by": "mallory"}, key="k-1")
    assert 422 == changed.status_code
    missing = team.instance.create(
        body={k: v for k, v in body.items() if k != "requested_by"}, key="k-1"
    )
    assert 422 == missing.status_code
    too_long = team.instance.create(body={**body, "requested_by": "x" * 201})
    assert 400 == too_long.status_code and "invalid_request" == error_type(too_long)
    wrong = team.instance.create(body={**body, "requested_by": 5})
    assert 400 == wrong.status_code
    for hostile in ("\u0000alice", "alice ", " ", "a\nb", "alice\u200b"):
        refused = team.instance.create(body={**body, "requested_by": hostile})
        assert 400 == refused.status_code, hostile


@pytest.mark.parametrize("spelling", ["Alice", "ALICE", "\uff41\uff4c\uff49\uff43\uff45"])
def test_the_requester_is_recognised_however_their_name_is_spelled(
    team: Team, spelling: str
) -> None:
    """self_approval = false holds for the same name in another case or compatibility form."""
    created = _refund(team, requested_by=spelling)
    refused = team.reviewer("alice").decide(created["id"], {"status": "approved"})
    assert 403 == refused.status_code, (spelling, refused.text)


def test_max_valid_for_refuses_a_longer_approval_and_caps_the_default(team: Team) -> None:
    """valid_for beyond 15m is 400 naming the limit; none given gets min(5m, 15m) = 5m."""
    created = _refund(team)
    refused = team.reviewer("alice").decide(
        created["id"], {"status": "approved", "valid_for": "16m"}
    )
    assert 400 == refused.status_code, refused.text
    assert "invalid_request" == error_type(refused)
    assert "15m" in refused.json()["error"]["message"]
    assert [] == team.instance.poll(created["id"]).json()["approvals"]  # nothing was counted
    assert 200 == team.reviewer("alice").decide(created["id"], {"status": "approved"}).status_code
    done = team.reviewer("bob").decide(created["id"], {"status": "approved"}).json()
    decision = done["decision"]
    assert timedelta(minutes=5) == parse_timestamp(decision["expires_at"]) - parse_timestamp(
        decision["decided_at"]
    )


def test_a_short_max_valid_for_caps_the_default(tmp_path: Any) -> None:
    """max_valid_for = 2m: an approval without valid_for stays valid 2 minutes, not 5."""
    rules = tmp_path / "r.toml"
    rules.write_text('[tools.t]\nmax_valid_for = "2m"\n')
    t = start_team(str(tmp_path / "db.sqlite3"), rules)
    try:
        reviewer_token = t.server.first_start_tokens.reviewer  # type: ignore[union-attr]
        created = t.instance.new(body={"tool": "t", "arguments": {}, "timeout": "30m"})
        from tests.support.api import Api

        done = Api(t.server.url, reviewer_token).decide(created["id"], {"status": "approved"})
        decision = done.json()["decision"]
        assert "reviewer" == decision["decided_by"]
        assert timedelta(minutes=2) == parse_timestamp(decision["expires_at"]) - parse_timestamp(
            decision["decided_at"]
        )
    finally:
        t.server.close()


def test_a_tool_without_rules_keeps_todays_behaviour(team: Team) -> None:
    """Any reviewer, one approval, decided_by the reviewer's name; no approvals fields."""
    created = team.instance.new(body={"tool": "send_email", "arguments": {}, "timeout": "30m"})
    assert "approvals" not in created
    done = team.reviewer("dave").decide(created["id"], {"status": "approved", "valid_for": "1h"})
    assert 200 == done.status_code, done.text
    assert "approved" == done.json()["status"]
    assert "dave" == done.json()["decision"]["decided_by"]
    rows = team.server.store.audit(request_id=created["id"])
    assert "1 of 1" == rows[-1].detail["approvals"]


def test_concurrent_approvals_by_different_people_count_once_each(team: Team) -> None:
    """alice and bob approve at the same instant: both counted, approved exactly once."""
    for _ in range(5):
        created = _refund(team)
        barrier = threading.Barrier(2)
        answers: dict[str, requests.Response] = {}

        def approve(
            name: str,
            request_id: str = created["id"],
            barrier: threading.Barrier = barrier,
            answers: dict[str, requests.Response] = answers,
        ) -> None:
            api = team.reviewer(name)
            barrier.wait()
            answers[name] = api.decide(request_id, {"status": "approved"})

        threads = [threading.Thread(target=approve, args=(n,)) for n in ("alice", "bob")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert [200, 200] == sorted(a.status_code for a in answers.values())
        statuses = sorted(a.json()["status"] for a in answers.values())
        assert ["approved", "pending"] == statuses
        final = team.instance.poll(created["id"]).json()
        assert "approved" == final["status"]
        assert 2 == len(final["approvals"])
        history = team.server.store.history(created["id"])
        assert history is not None
        decided = [e for e in history.events if e.type == "decided"]
        assert 1 == len(decided)


def test_the_review_list_shows_progress_and_why_a_reviewer_may_not_decide(team: Team) -> None:
    """display.approvals says "1 of 2 approvals: alice"; dave's and alice's views are read-only."""
    created = _refund(team, requested_by="bob")
    team.reviewer("alice").decide(created["id"], {"status": "approved"})

    def listed(name: str) -> dict[str, Any]:
        found = team.reviewer(name).get("/v1/requests?status=pending").json()["requests"]
        (one,) = [r for r in found if r["id"] == created["id"]]
        display: dict[str, Any] = one["display"]
        return display

    assert "1 of 2 approvals: alice" == listed("bob")["approvals"]
    assert "payments" in listed("carol")["read_only"]
    assert "payments" in listed("dave")["read_only"]
    assert "already approved" in listed("alice")["read_only"]
    # bob asked for it: he may not approve, and the page says so.
    assert "themselves" in listed("bob")["read_only"]


def test_the_history_carries_the_requests_audit_rows(team: Team) -> None:
    """GET /v1/requests/{id}/history has "audit": created, each approval, with who and where."""
    created = _refund(team)
    team.reviewer("alice").decide(created["id"], {"status": "approved"})
    team.reviewer("bob").decide(created["id"], {"status": "approved"})
    history = team.reviewer("alice").get(f"/v1/requests/{created['id']}/history").json()
    audit = history["audit"]
    assert ["request.created", "request.approval", "request.approval"] == [
        r["action"] for r in audit
    ]
    assert ["instance", "alice", "bob"] == [r["actor"] for r in audit]
    assert ["1 of 2", "2 of 2"] == [r["detail"]["approvals"] for r in audit[1:]]
    assert "alice, bob" == audit[-1]["detail"]["decided_by"]
    assert all(r["source"] == "127.0.0.1" for r in audit)
