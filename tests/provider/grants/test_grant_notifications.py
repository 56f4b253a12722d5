"""A grant's use is heard: a request.decided webhook naming it; and no mail asks anyone."""

from __future__ import annotations

from pathlib import Path

from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.channels.webhooks.signing import WebhookTarget
from tests.support.api import REFUND, Api
from tests.support.mail_team import Clock, start_mail_team
from tests.support.smtp import Mailbox
from tests.support.webhook_receiver import Receiver


def test_a_grants_use_is_a_request_decided_webhook_naming_the_grant(tmp_path: Path) -> None:
    """The covered create's events: created, then decided with decision.grant and decided_by."""
    with Receiver() as receiver:
        target = WebhookTarget(receiver.url, None, "standard")
        with ProviderServer(
            str(tmp_path / "a.db"), webhooks=(target,), webhook_backoff=0.05
        ) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            agent, reviewer = Api(server.url, tokens.instance), Api(server.url, tokens.reviewer)
            first = agent.new()
            answer = reviewer.decide(first["id"], {"status": "approved", "grant": {"for": "1h"}})
            grant_id = answer.json()["grant"]["id"]
            covered = agent.new()
            assert covered["status"] == "approved"
            events = receiver.wait_count(4)
    about = [one.json for one in events if one.json["data"]["id"] == covered["id"]]
    # Deliveries may arrive in either order (docs/provider.md): match them by type.
    assert sorted(one["type"] for one in about) == ["request.created", "request.decided"]
    decided = next(one for one in about if one["type"] == "request.decided")["data"]
    assert decided["status"] == "approved"
    assert decided["decision"]["grant"]["id"] == grant_id
    assert decided["decision"]["decided_by"] == "reviewer"


def test_no_mail_is_sent_for_a_request_a_grant_decided(tmp_path: Path) -> None:
    """Mail is queued for a request a person must decide, none for one a grant decided."""
    box = Mailbox().start()
    store = Store(str(tmp_path / "m.sqlite3"), clock=Clock())
    team = start_mail_team(store, box, Clock())
    try:
        agent, alice = team.instance, team.reviewer("alice")
        first = agent.new()
        # Asked of people: mailed.
        assert store.list_outbox(channels=["email"], request_id=first["id"])
        answer = alice.decide(first["id"], {"status": "approved", "grant": {"for": "1h"}})
        assert answer.status_code == 200, answer.text
        covered = agent.new(arguments=REFUND)
        assert covered["status"] == "approved"
        assert store.list_outbox(channels=["email"], request_id=covered["id"]) == []
    finally:
        team.server.close()
        store.close()
        box.close()
