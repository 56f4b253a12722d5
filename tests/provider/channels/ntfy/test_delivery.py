"""Publishing through the outbox: outages retried (``Retry-After`` honoured), a bad token final."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from approval_guard.provider import StoreProtocol
from tests.support.api import Api
from tests.support.fake_ntfy import TOKEN, FakeNtfy
from tests.support.mail_team import Clock
from tests.support.ntfy_team import NtfyTeam, start_ntfy_team, topic

WRONG = "tk_wrongwrongwrongwrongwrong01"


@pytest.fixture
def wrong_token(store: tuple[StoreProtocol, Clock], ntfy: FakeNtfy) -> Iterator[NtfyTeam]:
    """A provider whose ntfy token the server does not know."""
    opened, clock = store
    started = start_ntfy_team(opened, ntfy, clock, token=WRONG)
    try:
        yield started
    finally:
        started.server.close()


def _audited(team: NtfyTeam, action: str, n: int) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []

    def there(_: FakeNtfy) -> bool:
        found[:] = [row.detail for row in team.store.audit() if row.action == action]
        return len(found) >= n

    assert team.ntfy.wait_for(there), [row.action for row in team.store.audit()]
    return found


def test_an_outage_is_retried_until_ntfy_answers(team: NtfyTeam) -> None:
    """While ntfy answers 503 the push is retried; once it is back, it arrives."""
    team.ntfy.down = True
    request_id = team.new()
    assert team.ntfy.wait_for(
        lambda fake: sum(1 for one in fake.publishes if one.topic == topic("alice")) >= 3
    )
    team.ntfy.down = False
    assert team.published(request_id, "alice").status == 200
    assert {one.status for one in team.ntfy.publishes} == {503, 200}


def test_a_429_is_retried_after_its_retry_after(team: NtfyTeam) -> None:
    """ntfy's 429 with ``Retry-After: 1`` is tried again no sooner than a second later."""
    limited = {"code": 42901, "http": 429, "error": "limit reached: too many requests"}
    team.ntfy.script = [(429, limited, {"Retry-After": "1"})]
    request_id = team.new()
    team.published(request_id, "alice")
    team.published(request_id, "bob")
    first = next(one for one in team.ntfy.publishes if one.status == 429)
    after = [one for one in team.ntfy.publishes if one.topic == first.topic and one.at > first.at]
    assert after and after[0].status == 200
    assert after[0].at - first.at >= 0.95


def test_a_refused_token_is_given_up_at_once_audited_and_never_shown(
    wrong_token: NtfyTeam, caplog: pytest.LogCaptureFixture
) -> None:
    """401: each push is tried once, given up, audited and logged; the token appears nowhere."""
    caplog.set_level(logging.DEBUG)
    team = wrong_token
    request_id = team.new()
    given_up = _audited(team, "ntfy.given_up", 2)
    # Each topic only in part (every reviewer can read a request's history).
    assert {row["target"] for row in given_up} == {topic(one)[:4] + "…" for one in ("alice", "bob")}
    assert all("ntfy refused the access token (HTTP 401" in str(row["result"]) for row in given_up)
    assert [one.status for one in team.ntfy.publishes] == [401, 401]
    items = team.store.list_outbox(channels=["ntfy"], request_id=request_id)
    assert len(items) == 2 and all(one.state == "given_up" for one in items)
    shown = caplog.text + json.dumps([row.detail for row in team.store.audit()])
    assert "ntfy refused the access token" in caplog.text
    assert WRONG not in shown and WRONG not in repr(items)


def test_the_token_is_sent_but_never_logged_stored_or_published(
    team: NtfyTeam, caplog: pytest.LogCaptureFixture
) -> None:
    """The right token goes in the header only: not in a log line, an audit row or a message."""
    caplog.set_level(logging.DEBUG)
    request_id = team.new()
    alice = team.published(request_id, "alice")
    assert team.ntfy.tap(alice, "Approve").status == 200
    _audited(team, "ntfy.sent", 4)  # two pushes, then two ended notices
    published = json.dumps([one.body for one in team.ntfy.publishes])
    stored = json.dumps([row.detail for row in team.store.audit()]) + repr(
        team.store.list_outbox(channels=["ntfy"])
    )
    assert TOKEN not in caplog.text + published + stored


def test_nothing_is_pushed_for_a_request_decided_meanwhile(team: NtfyTeam) -> None:
    """Decided while ntfy was down: its buttons are never sent, only the ended notice."""
    team.ntfy.down = True
    request_id = team.new()
    assert team.ntfy.wait_for(lambda fake: len(fake.publishes) >= 2)
    bob = Api(team.server.url, team.tokens["bob"])
    decided = bob.session.post(
        f"{team.server.url}/v1/requests/{request_id}/decision",
        json={"status": "denied"},
        headers=bob.headers(),
        timeout=10,
    )
    assert decided.status_code == 200, decided.text
    team.ntfy.down = False
    skipped = _audited(team, "ntfy.skipped", 2)
    assert all("already denied" in str(row["result"]) for row in skipped)
    _audited(team, "ntfy.sent", 2)
    accepted = team.ntfy.accepted()
    assert len(accepted) == 2 and not any(one.body.get("actions") for one in accepted)
    assert {one.body["title"] for one in accepted} == {"Denied: issue_refund"}
