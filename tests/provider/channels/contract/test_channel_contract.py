"""The channel contract: what every channel (webhooks, Slack, email, ntfy, Discord) must do.

Run on every registered driver, on SQLite and on PostgreSQL: a new request
reaches it; an approval counted updates it; a decision ends its actions; a
stale, forged, replayed, unknown, removed, not-allowed or self act records
nothing; an outage is retried and a permanent failure stops.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.provider.channels.contract.conftest import Setup
from tests.support.api import wait_for


def _decisions(setup: Setup, request_id: str) -> list[Any]:
    """The request's own audit rows (a decision, an approval), not its deliveries'."""
    return [row for row in setup.store.audit(request_id=request_id) if row.actor != "system"]


def test_a_new_request_reaches_it(setup: Setup) -> None:
    """A request created pending is shown on the channel."""
    made = setup.new()
    setup.driver.wait_reached(made["id"])


def test_an_approval_counted_updates_it(following: Setup) -> None:
    """One approval of two: what the channel shows follows it."""
    made = following.new("issue_refund")
    following.driver.wait_reached(made["id"])
    answer = following.driver.act(made["id"], "bob", "approved")
    assert answer.status < 400, answer.text
    following.driver.wait_updated(made["id"])
    assert "pending" == following.status(made["id"])


def test_a_decision_ends_its_actions(setup: Setup) -> None:
    """Decided elsewhere (the API): the channel shows the end and its actions decide nothing."""
    from tests.support.api import Api

    made = setup.new()
    setup.driver.wait_reached(made["id"])
    Api(setup.server.url, setup.tokens["bob"]).decide(made["id"], {"status": "denied"})
    setup.driver.wait_ended(made["id"], "denied")
    if setup.driver.acts:
        late = setup.driver.act(made["id"], "alice", "approved")
        assert "denied" == setup.status(made["id"])
        assert late.status >= 400 or "Not recorded" in late.text, late.text


def test_an_act_decides_through_the_one_path_and_a_replay_records_nothing(acting: Setup) -> None:
    """Bob approves through the channel; the same act again changes nothing."""
    made = acting.new()
    acting.driver.wait_reached(made["id"])
    first = acting.driver.act(made["id"], "bob", "approved")
    assert first.status < 400, first.text
    wait_for(lambda: acting.status(made["id"]), lambda status: status == "approved")
    audit_before = _decisions(acting, made["id"])
    again = first.replay()
    assert again.status < 500, again.text
    assert audit_before == _decisions(acting, made["id"])
    decided = [row for row in audit_before if row.action == "request.approval"]
    assert [acting.driver.name] == [row.detail.get("channel") for row in decided]


@pytest.mark.parametrize("who", ["forged", "unknown", "removed", "not_allowed", "self"])
def test_an_act_that_may_not_decide_records_nothing(acting: Setup, who: str) -> None:
    """A forged act, a stranger, a removed reviewer, a role the rule does not allow, the asker."""
    made = acting.new(requested_by="alice")
    acting.driver.wait_reached(made["id"])
    audit_before = _decisions(acting, made["id"])
    if who == "forged":
        got = acting.driver.act(made["id"], "bob", "approved", forged=True)
    elif who == "unknown":
        got = acting.driver.act_unknown(made["id"])
    elif who == "removed":
        acting.driver.wait_reached_person(made["id"], "dave")
        assert acting.store.remove_reviewer("dave")
        got = acting.driver.act(made["id"], "dave", "approved")
    elif who == "not_allowed":
        got = acting.driver.act(made["id"], "carol", "approved")
    else:
        got = acting.driver.act(made["id"], "alice", "approved")
    assert "pending" == acting.status(made["id"]), got.text
    assert got.status >= 400 or "Not recorded" in got.text, (got.status, got.text)
    assert audit_before == _decisions(acting, made["id"])
    # The same person, genuine and allowed, still decides it: nothing was used up.
    assert acting.driver.act(made["id"], "bob", "approved").status < 400
    wait_for(lambda: acting.status(made["id"]), lambda status: status == "approved")


def test_an_outage_is_retried_and_delivered(setup: Setup) -> None:
    """The receiver is down when the request is made, then back: it arrives, once up again."""
    setup.driver.outage(True)
    made = setup.new()
    wait_for(
        lambda: [r for r in setup.store.list_outbox(request_id=made["id"]) if r.attempts >= 1],
        timeout=20,
    )
    setup.driver.outage(False)
    setup.driver.wait_reached(made["id"])


def test_a_permanent_failure_stops_and_is_audited(setup: Setup) -> None:
    """Refused for good: each item given up after one attempt, audited, never tried again."""
    setup.driver.refuse_for_good()
    made = setup.new()

    def settled() -> list[Any]:
        rows = setup.store.list_outbox(request_id=made["id"], channels=[setup.driver.name])
        return [row for row in rows if row.state != "pending"] if rows else []

    rows = wait_for(
        settled,
        lambda rows: (
            rows
            and len(rows)
            == len(setup.store.list_outbox(request_id=made["id"], channels=[setup.driver.name]))
        ),
        timeout=20,
    )
    assert {"given_up"} == {row.state for row in rows}
    assert {1} == {row.attempts for row in rows}
    # Audited just after it is settled, once per item.
    wait_for(
        lambda: [
            entry
            for entry in setup.store.audit(request_id=made["id"])
            if entry.action.endswith(".given_up")
        ],
        lambda found: len(found) == len(rows),
    )
    assert "pending" == setup.status(made["id"])
