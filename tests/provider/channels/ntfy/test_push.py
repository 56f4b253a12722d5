"""A new request pushed to each allowed reviewer's topic, and a tapped button deciding it."""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import quote

import pytest

from approval_guard.provider import StoreProtocol
from approval_guard.provider.channels import decisions as channel_decisions
from approval_guard.provider.channels.ntfy.tokens import APPROVE, action_url, sign
from approval_guard.provider.store.models import Forbidden
from tests.support.cli import free_port
from tests.support.fake_ntfy import TOKEN, FakeNtfy
from tests.support.mail_team import Clock
from tests.support.ntfy_team import NtfyTeam, start_ntfy_team, topic
from tests.support.prefix_proxy import prefix_proxy


def _token(url: str) -> str:
    found = re.search(r"[?&]token=([^&]+)", url)
    assert found is not None
    return found.group(1)


def test_a_new_request_reaches_each_allowed_reviewers_topic_only(team: NtfyTeam) -> None:
    """alice and bob (payments, linked) get one push each; carol (ops) and dave (no topic) none."""
    request_id = team.new(context="Refund for order 1234")
    alice, bob = team.published(request_id, "alice"), team.published(request_id, "bob")
    assert alice.headers["authorization"] == f"Bearer {TOKEN}"
    assert alice.headers["content-type"] == "application/json"
    assert alice.body["title"] == "Approval needed: issue_refund"
    assert "The agent says:\n> Refund for order 1234" in alice.body["message"]
    assert '"amount": 4900' in alice.body["message"] and "For alice only" in alice.body["message"]
    assert "For bob only" in bob.body["message"]
    urls = [one["url"] for one in alice.body["actions"]]
    path = f"{team.server.url}/ntfy/requests/{quote(request_id, safe='')}/decision?token="
    assert all(url.startswith(path) for url in urls) and len(set(urls)) == 2
    assert _token(urls[0]) not in bob.body["actions"][0]["url"]  # each reviewer their own
    assert {one.topic for one in team.ntfy.accepted()} == {topic("alice"), topic("bob")}
    assert sum(1 for one in team.ntfy.accepted() if one.body.get("actions")) == 2


def test_the_approve_button_decides_as_that_reviewer(team: NtfyTeam) -> None:
    """alice's Approve, as the phone posts it, approves; audited as ntfy, part of her topic."""
    request_id = team.new()
    tapped = team.ntfy.tap(team.published(request_id, "alice"), "Approve")
    assert tapped.status == 200 and tapped.body["status"] == "approved", tapped
    assert team.instance.poll(request_id).json()["status"] == "approved"
    [(action, detail)] = team.decisions(request_id)
    assert action == "request.approval"
    # The topic only in part: every reviewer can read a request's history.
    assert (detail["channel"], detail["channel_user"]) == ("ntfy", topic("alice")[:4] + "…")
    # Then both are told it ended (ntfy cannot edit the first notification).
    for name in ("alice", "bob"):
        assert team.ntfy.wait_for(functools.partial(_ended, where=topic(name)))


def _ended(fake: FakeNtfy, where: str) -> bool:
    return any(one.body["title"] == "Approved: issue_refund" for one in fake.accepted(where))


def test_the_deny_button_denies(team: NtfyTeam) -> None:
    """bob's Deny denies the request."""
    request_id = team.new()
    assert team.ntfy.tap(team.published(request_id, "bob"), "Deny").status == 200
    assert team.instance.poll(request_id).json()["status"] == "denied"
    assert [action for action, _ in team.decisions(request_id)] == ["request.denial"]


def test_a_used_notification_decides_nothing_more(team: NtfyTeam) -> None:
    """On a quorum, alice's second tap (Approve again, or Deny) is 409 and counts nothing."""
    request_id = team.new("big_refund")
    alice = team.published(request_id, "alice")
    assert team.ntfy.tap(alice, "Approve").status == 200
    for label in ("Approve", "Deny"):
        again = team.ntfy.tap(alice, label)
        assert again.status == 409, again
    polled = team.instance.poll(request_id).json()
    assert polled["status"] == "pending" and len(polled["approvals"]) == 1
    assert len(team.decisions(request_id)) == 1
    assert team.ntfy.tap(team.published(request_id, "bob"), "Approve").status == 200
    assert team.instance.poll(request_id).json()["status"] == "approved"


def test_tampered_foreign_and_late_buttons_decide_nothing(team: NtfyTeam) -> None:
    """An altered token is 400, one used on another request 400, one after the deadline 410."""
    request_id, other = team.new(), team.new()
    alice = team.published(request_id, "alice")
    url = alice.action("Approve")["url"]
    token = _token(url)
    flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    assert team.ntfy.tap(alice, "Approve", url=url.replace(token, flipped)).status == 400
    assert team.ntfy.tap(alice, "Approve", url=url + "&token=" + token).status == 400
    assert team.ntfy.tap(alice, "Approve", url=url.split("?")[0]).status == 400
    foreign = url.replace(quote(request_id, safe=""), quote(other, safe=""))
    assert team.ntfy.tap(alice, "Approve", url=foreign).status == 400
    team.later(31 * 60)
    assert team.ntfy.tap(alice, "Approve", url=url).status == 410
    for one in (request_id, other):
        assert team.decisions(one) == []


def test_a_removed_or_relinked_reviewer_decides_nothing(team: NtfyTeam) -> None:
    """After bob is removed, or alice's topic changes (even back), their buttons are 403."""
    request_id = team.new()
    alice, bob = team.published(request_id, "alice"), team.published(request_id, "bob")
    assert team.store.remove_reviewer("bob")
    assert team.ntfy.tap(bob, "Approve").status == 403
    team.store.link_identity("alice", "ntfy", "alice-new-Pq8wE5rT2yU7")
    assert team.ntfy.tap(alice, "Approve").status == 403
    team.store.link_identity("alice", "ntfy", topic("alice"))
    assert team.ntfy.tap(alice, "Approve").status == 403
    assert team.decisions(request_id) == []
    assert team.instance.poll(request_id).json()["status"] == "pending"


def test_a_reviewer_the_rule_does_not_allow_decides_nothing(team: NtfyTeam) -> None:
    """A genuine token for carol (ops) or for the person who asked records nothing: 403."""
    request_id = team.new(requested_by="alice")
    bob = team.published(request_id, "bob")
    assert not [one for one in team.ntfy.accepted(topic("alice")) if one.body.get("actions")]
    request = team.store.get_request(request_id)
    assert request is not None
    for name in ("carol", "alice"):
        reviewer = team.store.reviewer_by_identity("ntfy", topic(name))
        assert reviewer is not None
        token = sign(
            team.store.link_secret(),
            item_id=f"forged-{name}",
            request_id=request_id,
            reviewer_id=reviewer.id,
            topic=topic(name),
            action=APPROVE,
            expires_at=request.deadline_at,
        )
        tapped = team.ntfy.tap(bob, "Approve", url=action_url(team.server.url, request_id, token))
        assert tapped.status == 403, tapped
    assert team.decisions(request_id) == []
    assert team.ntfy.tap(bob, "Approve").status == 200


def test_a_get_of_the_button_url_decides_nothing(team: NtfyTeam) -> None:
    """A link preview's GET is 405; the request stays pending."""
    request_id = team.new()
    alice = team.published(request_id, "alice")
    assert team.ntfy.tap(alice, "Approve", method="GET").status == 405
    assert team.decisions(request_id) == []


def test_a_public_url_with_a_path_works_behind_a_proxy(
    store: tuple[StoreProtocol, Clock], ntfy: FakeNtfy
) -> None:
    """``--public-url http://proxy/approvals``: the buttons post through the path, and decide."""
    opened, clock = store
    port = free_port()
    with prefix_proxy("/approvals") as proxy:
        proxy.upstream = f"http://127.0.0.1:{port}"
        team = start_ntfy_team(opened, ntfy, clock, port=port, public_url=proxy.base)
        try:
            request_id = team.new()
            alice = team.published(request_id, "alice")
            assert alice.action("Approve")["url"].startswith(f"{proxy.base}/ntfy/")
            assert alice.body["click"] == f"{proxy.base}/?request={request_id}"
            assert team.ntfy.tap(alice, "Approve").status == 200
            assert team.instance.poll(request_id).json()["status"] == "approved"
            assert any(path.startswith("/approvals/ntfy/requests/") for _, path, _ in proxy.seen)
        finally:
            team.server.close()


def test_a_rule_in_the_one_decision_function_binds_the_buttons(
    team: NtfyTeam, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule added to ``channels.decisions.decide`` refuses a tap: 403, nothing recorded."""
    seen: list[str] = []

    def ruled(*args: Any, **kwargs: Any) -> Any:
        seen.append(str(kwargs["channel"]))
        raise Forbidden("test rule")

    monkeypatch.setattr(channel_decisions, "decide", ruled)
    request_id = team.new()
    tapped = team.ntfy.tap(team.published(request_id, "alice"), "Approve")
    assert tapped.status == 403 and "test rule" in tapped.body["error"]["message"]
    assert seen == ["ntfy"] and team.decisions(request_id) == []


def test_huge_arguments_are_published_cut_within_ntfys_limits(team: NtfyTeam) -> None:
    """Arguments far beyond 4 KiB (escapes doubling them in JSON) are cut, and ntfy takes them."""
    request_id = team.new(arguments={"q": '"' * 3000, "text": "\u4e2d" * 3000})
    alice = team.published(request_id, "alice")
    assert "cut to fit the notification" in alice.body["message"]
    assert len(alice.body["message"].encode("utf-8")) <= 4096
