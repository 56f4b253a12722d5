"""A create answered already decided (API 1.3): by a standing grant, a standing denial, or a rule.

The provider side is built elsewhere; here a provider on 127.0.0.1 answers the
create ``201`` with the 1.3 shapes (``tests/support/hostile.py``), and every
check of an approval still applies to it: the echo, the expiry, the claim.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.wire import format_timestamp
from approval_guard._codec.wire_models import parse_decision
from tests.support.hostile import HostileProvider, approved, denied, hostile_guard
from tests.support.tools import MODES, define, run

Hostile = Callable[..., HostileProvider]

NOW = datetime.now(timezone.utc)
GRANT = {
    "id": "grant-7",
    "granted_by": ["alice"],
    "granted_at": format_timestamp(NOW - timedelta(minutes=5)),
    "expires_at": format_timestamp(NOW + timedelta(minutes=55)),
    "uses_left": 9,
}


def _refund(guard: ag.Guard, mode: str, ran: list[Any]) -> Callable[..., Any]:
    def issue_refund(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return "refunded"

    return define(guard, mode, issue_refund, timeout="10m")


def _by_grant(r: dict[str, Any], _: str) -> tuple[int, Any]:
    return 201, approved(r, decided_by="alice", grant=GRANT)


@pytest.mark.parametrize("mode", MODES)
def test_a_create_approved_by_a_grant_runs_after_one_round_trip_and_names_the_grant(
    hostile: Hostile, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No poll: the tool starts after the create; the event and the log line name the grant."""
    caplog.set_level(logging.INFO, logger="approval_guard")
    p = hostile(create=_by_grant)
    events: list[Any] = []
    ran: list[Any] = []
    out = run(_refund(ag.Guard(**_settings(p, events)), mode, ran), "p_1", 49)
    assert "refunded" == out
    assert [("p_1", 49)] == ran
    assert ["create"] == p.seen
    (decided,) = [e for e in events if isinstance(e, ag.Decided)]
    assert ("approved", "alice", "grant-7", "alice", None) == (
        decided.status,
        decided.decided_by,
        decided.grant_id,
        decided.granted_by,
        decided.rule,
    )
    names = [type(e).__name__ for e in events]
    assert names.index("Decided") < names.index("ToolStarted")
    (line,) = [r.getMessage() for r in caplog.records if "request decided" in r.getMessage()]
    assert line.endswith("decided_by=alice grant=grant-7 granted_by=alice")


def _settings(p: HostileProvider, events: list[Any]) -> dict[str, Any]:
    return {
        "base_url": p.url,
        "credential": "cred-review-1",
        "harness_limit": "20s",
        "poll_wait": "1s",
        "return_margin": "1s",
        "deadline_margin": "1s",
        "on_event": events.append,
        # Its own record: a port the process reused must not find another test's request ids.
        "ledger": ag.MemoryLedger(),
    }


@pytest.mark.parametrize("mode", MODES)
def test_a_create_approved_by_a_rule_names_the_rule(
    hostile: Hostile, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``decided_by = "rule:NAME"`` with no grant: the event and the log line say the rule."""
    caplog.set_level(logging.INFO, logger="approval_guard")
    p = hostile(create=lambda r, _: (201, approved(r, decided_by="rule:small GBP refunds")))
    events: list[Any] = []
    assert "refunded" == run(_refund(ag.Guard(**_settings(p, events)), mode, []), "p_1", 49)
    (decided,) = [e for e in events if isinstance(e, ag.Decided)]
    assert ("small GBP refunds", None, None) == (decided.rule, decided.grant_id, decided.granted_by)
    (line,) = [r.getMessage() for r in caplog.records if "request decided" in r.getMessage()]
    assert line.endswith("decided_by=rule:small GBP refunds rule=small GBP refunds")


@pytest.mark.parametrize("mode", MODES)
def test_a_standing_denial_is_denied_and_says_whose(hostile: Hostile, mode: str) -> None:
    """Reason ``denied`` (a person's standing choice), in words that say it was not a click now."""

    def create(r: dict[str, Any], _: str) -> tuple[int, Any]:
        body = denied(r, "no refunds to this customer")
        body["decision"].update(decided_by="alice", grant={**GRANT, "id": "deny-3"})
        return 201, body

    p = hostile(create=create)
    ran: list[Any] = []
    out = run(_refund(hostile_guard(p), mode, ran), "p_1", 49)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.DENIED == out.reason
    assert out.message == (
        "This call to issue_refund was denied by standing denial deny-3 of alice: "
        "no refunds to this customer"
    )
    assert "alice" == out.decided_by
    assert [] == ran
    assert ["create"] == p.seen


@pytest.mark.parametrize("mode", MODES)
def test_a_denial_by_rule_says_which_rule(hostile: Hostile, mode: str) -> None:
    """A rules-file deny: ``denied``, "denied by rule NAME"."""

    def create(r: dict[str, Any], _: str) -> tuple[int, Any]:
        body = denied(r, "")
        body["decision"].update(note=None, decided_by="rule:no crypto")
        return 201, body

    p = hostile(create=create)
    out = run(_refund(hostile_guard(p), mode, []), "p_1", 49)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.DENIED == out.reason
    assert "This call to issue_refund was denied by rule no crypto." == out.message


def test_a_person_s_denial_still_says_a_person_denied(hostile: Hostile) -> None:
    """Without a grant or a rule, the sentence is as before."""
    p = hostile(create=lambda r, _: (201, denied(r, "no")))
    out = run(_refund(hostile_guard(p), "sync", []), "p_1", 49)
    assert isinstance(out, ag.NotRun)
    assert "A person denied this call to issue_refund: no" == out.message


@pytest.mark.parametrize("mode", MODES)
def test_an_expired_approval_by_a_grant_does_not_run(hostile: Hostile, mode: str) -> None:
    """The approval's own expiry still rules: a grant's long life does not extend it."""

    def create(r: dict[str, Any], _: str) -> tuple[int, Any]:
        past = format_timestamp(datetime.now(timezone.utc) - timedelta(seconds=30))
        return 201, approved(r, decided_by="alice", grant=GRANT, expires_at=past)

    ran: list[Any] = []
    out = run(_refund(hostile_guard(hostile(create=create)), mode, ran), "p_1", 49)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.APPROVAL_EXPIRED == out.reason
    assert [] == ran


@pytest.mark.parametrize("mode", MODES)
def test_an_approval_by_a_grant_for_other_arguments_does_not_run(
    hostile: Hostile, mode: str
) -> None:
    """The echo check still rules: a grant's approval of another call is not this call's."""

    def create(r: dict[str, Any], _: str) -> tuple[int, Any]:
        other = {**r, "arguments": {**r["arguments"], "amount": 4900}}
        return 201, approved(other, decided_by="alice", grant=GRANT)

    ran: list[Any] = []
    out = run(_refund(hostile_guard(hostile(create=create)), mode, ran), "p_1", 49)
    assert isinstance(out, ag.NotRun)
    assert "different arguments" in out.message
    assert [] == ran


def test_the_same_request_approved_by_a_grant_runs_at_most_once(hostile: Hostile) -> None:
    """The execution record's claim still rules: the same request id twice runs once."""
    p = hostile(create=_by_grant)
    ran: list[Any] = []
    tool = _refund(hostile_guard(p), "sync", ran)
    assert "refunded" == run(tool, "p_1", 49)
    again = run(tool, "p_1", 49)
    assert isinstance(again, ag.NotRun)
    assert ag.Reason.ALREADY_EXECUTED == again.reason
    assert [("p_1", 49)] == ran


MALFORMED_GRANTS: list[Any] = [
    "grant-7",
    ["grant-7"],
    7,
    True,
    {},
    {"id": 7},
    {"id": ""},
    {"id": "has a space"},
    {"id": "x" * 201},
    {"id": "bell\x07"},
    {"id": "g", "granted_by": 7, "granted_at": "yesterday", "expires_at": [], "uses_left": -1},
    {"id": "g", "granted_by": [1, "bob"], "uses_left": 2.5},
    {"id": "g", "granted_by": {"name": "alice"}, "uses_left": True},
    {"id": {"nested": [{"deep": None}]}},
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("grant", MALFORMED_GRANTS)
def test_a_malformed_grant_never_makes_a_call_raise_nor_decides_anything(
    hostile: Hostile, mode: str, grant: Any
) -> None:
    """Informational only: dropped (whole, or the part that is bad); the status still rules."""
    p = hostile(create=lambda r, _: (201, approved(r, decided_by="alice", grant=grant)))
    events: list[Any] = []
    ran: list[Any] = []
    out = run(_refund(ag.Guard(**_settings(p, events)), mode, ran), "p_1", 49)
    assert "refunded" == out
    (decided,) = [e for e in events if isinstance(e, ag.Decided)]
    if isinstance(grant, dict) and grant.get("id") == "g":
        assert "g" == decided.grant_id
        assert decided.granted_by is None
    else:
        assert decided.grant_id is None and decided.granted_by is None


def test_a_malformed_grant_on_a_pending_create_does_not_approve_it(hostile: Hostile) -> None:
    """A grant object on a pending request is no approval: the call waits, and is denied."""

    def create(r: dict[str, Any], _: str) -> tuple[int, Any]:
        return 201, {**r, "decision": {"status": "approved", "grant": GRANT}}

    p = hostile(create=create, read=lambda r, _: (200, denied(r, "no")))
    ran: list[Any] = []
    out = run(_refund(hostile_guard(p), "sync", ran), "p_1", 49)
    assert isinstance(out, ag.NotRun)
    assert [] == ran


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
GRANT_SHAPES = st.fixed_dictionaries(
    {},
    optional={
        "id": st.text() | JSON,
        "granted_by": st.lists(st.text(), max_size=3) | JSON,
        "granted_at": st.just(GRANT["granted_at"]) | JSON,
        "expires_at": st.just(GRANT["expires_at"]) | JSON,
        "uses_left": st.integers() | JSON,
    },
)


@given(grant=GRANT_SHAPES | JSON)
def test_any_grant_value_parses_without_raising(grant: Any) -> None:
    """Whatever ``decision.grant`` holds, the decision still parses; a kept id is plain."""
    decision = parse_decision(
        {
            "status": "approved",
            "note": None,
            "decided_at": GRANT["granted_at"],
            "expires_at": GRANT["expires_at"],
            "grant": grant,
        }
    )
    if decision.grant is not None:
        assert decision.grant.id.isprintable() and " " not in decision.grant.id
        assert decision.grant.uses_left is None or decision.grant.uses_left >= 0
