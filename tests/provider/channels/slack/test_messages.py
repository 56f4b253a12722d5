"""The request's Slack message: posted, kept current by the outbox, across outages and restarts."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from approval_guard.provider import ProviderServer
from tests.provider.channels.slack.conftest import SlackTeam, add_people, start
from tests.support.api import Api
from tests.support.fake_slack import TOKEN, FakeSlack
from tests.support.slack_clicks import CHANNEL, block_action, post


def _texts(message: dict[str, Any]) -> str:
    return json.dumps(message["blocks"], ensure_ascii=False)


def _buttons(message: dict[str, Any]) -> list[str]:
    return [
        element["action_id"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]


def _message_says(slack: FakeSlack, words: str, timeout: float = 10.0) -> dict[str, Any]:
    assert slack.wait_for(
        lambda s: any(words in _texts(m) for m in s.messages.values()), timeout
    ), [_texts(m) for m in slack.messages.values()]
    return slack.only_message()


def test_a_new_request_posts_a_block_kit_message(team: SlackTeam) -> None:
    """Tool, arguments, who asked, time left, who must approve, and the three buttons."""
    team.new("issue_refund", requested_by="frank", editable=[])
    call = team.slack.wait_calls("chat.postMessage")[0]
    assert CHANNEL == call.body["channel"]
    assert "Bearer xoxb-" in call.headers["authorization"]
    text = _texts(call.body)
    for part in (
        "`issue_refund`",
        "`payment_id`",
        '`\\"payment_123\\"`',
        "`4900`",
        "asked by `frank`",
    ):
        assert part in text
    assert "2 approvals from: payments" in text
    assert "left (until <!date^" in text
    assert ["ag_approve", "ag_deny", "ag_grant"] == _buttons(call.body)


def test_edit_and_approve_is_offered_only_where_edits_are_allowed(team: SlackTeam) -> None:
    """A request with editable arguments and one approval shows "Edit and approve…"."""
    team.new(editable=["amount"])
    call = team.slack.wait_calls("chat.postMessage")[0]
    assert ["ag_approve", "ag_deny", "ag_edit", "ag_grant"] == _buttons(call.body)


def test_arguments_keep_markers_are_cut_and_escape_slack_markup(team: SlackTeam) -> None:
    """A listed redaction shows as one, an unlisted marker as JSON; <!channel> cannot ping; cut."""
    arguments = {
        "note": "<!channel> <https://evil.example|bank> & `x`",
        "card": {"$redacted": "1a2b3c4d5e6f"},
        "memo": {"$redacted": "0123456789ab"},
        "blob": "y" * 1000,
    }
    team.new(arguments=arguments, redacted=["/card"])
    text = _texts(team.slack.wait_calls("chat.postMessage")[0].body)
    assert '`{\\"$redacted\\":\\"0123456789ab\\"}`' in text
    assert "redacted 0123456789ab" not in text
    assert "<!channel>" not in text and "<https://evil" not in text
    assert "&lt;!channel&gt;" in text and "&amp;" in text
    assert "\u2039redacted 1a2b3c4d5e6f\u203a" in text
    assert "y" * 300 not in text and "\u2026" in text


def test_the_message_follows_each_approval_and_the_decision(team: SlackTeam) -> None:
    """ "1 of 2: alice" after one approval; approved by both, buttons gone, after the second."""
    made = team.new("issue_refund")
    team.slack.wait_calls("chat.postMessage")
    post(team.url, block_action("U0ALICE", "ag_approve", made["id"]))
    first = _message_says(team.slack, "1 of 2: alice")
    assert ["ag_approve", "ag_deny", "ag_grant"] == _buttons(first)
    assert 200 == team.reviewer("bob").decide(made["id"], {"status": "approved"}).status_code
    done = _message_says(team.slack, "Approved")
    assert [] == _buttons(done)
    assert "alice, bob" in _texts(done)
    assert all(call.method != "chat.postMessage" for call in team.slack.of("chat.update"))


def test_the_message_follows_expiry_and_cancellation(team: SlackTeam) -> None:
    """Expired and cancelled requests lose their buttons and say so."""
    expiring = team.new(timeout="1s")
    cancelled = team.new()
    team.slack.wait_calls("chat.postMessage", 2)
    assert 200 == team.instance.cancel(cancelled["id"], {"reason": "user gave up"}).status_code
    assert team.slack.wait_for(
        lambda s: sum("no longer pending" in _texts(m) for m in s.messages.values()) == 2
    ), [_texts(m) for m in team.slack.messages.values()]
    shown = {m["text"]: m for m in team.slack.messages.values()}
    for message in shown.values():
        assert [] == _buttons(message)
    everything = " ".join(_texts(m) for m in shown.values())
    assert "expired at" in everything and "cancelled" in everything
    assert "user gave up" in everything
    del expiring


def test_a_slack_outage_never_blocks_a_request_or_a_decision(team: SlackTeam) -> None:
    """With Slack down, create and decide answer at once; the message catches up later."""
    team.slack.down = True
    began = time.monotonic()
    made = team.new()
    assert 200 == team.reviewer("alice").decide(made["id"], {"status": "approved"}).status_code
    assert time.monotonic() - began < 3
    team.slack.wait_calls("chat.postMessage")  # failing, being retried
    team.slack.down = False
    _message_says(team.slack, "Approved")


def test_a_429_retry_after_is_honoured(team: SlackTeam) -> None:
    """Slack's 429 with Retry-After: 1 delays the next call by about a second."""
    team.slack.script.append((429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}))
    team.new()
    calls = team.slack.wait_calls("chat.postMessage", 2)
    assert 429 == calls[0].status and 200 == calls[1].status
    assert calls[1].at - calls[0].at >= 0.9


def test_message_updates_arrive_after_a_provider_restart(
    tmp_path: Path, fake_slack: FakeSlack, rules_file: Path
) -> None:
    """Posts and updates queued while Slack was down are delivered after a restart."""
    db = str(tmp_path / "restart.sqlite3")
    fake_slack.down = True
    server = start(db, fake_slack, rules_file)
    tokens = server.first_start_tokens
    assert tokens is not None
    people = add_people(server)
    made = Api(server.url, tokens.instance).new(
        body={"tool": "small_refund", "arguments": {"amount": 1}, "timeout": "30m"}
    )
    assert (
        200 == Api(server.url, people["bob"]).decide(made["id"], {"status": "approved"}).status_code
    )
    server.stop()
    fake_slack.down = False
    again = ProviderServer(db, rules=rules_file, slack=server._slack, webhook_backoff=0.05)
    try:
        again.start()
        message = _message_says(fake_slack, "Approved")
        assert [] == _buttons(message)
        assert fake_slack.of("chat.update") or "Approved" in _texts(message)
    finally:
        again.close()
        server.close()


def test_updates_after_a_restart_edit_the_message_posted_before(
    database: Any, fake_slack: FakeSlack, rules_file: Path
) -> None:
    """The message's channel and ts are kept: an update after a restart edits the same message."""
    server = start(database, fake_slack, rules_file)
    tokens = server.first_start_tokens
    assert tokens is not None
    people = add_people(server)
    made = Api(server.url, tokens.instance).new(
        body={"tool": "small_refund", "arguments": {"amount": 1}, "timeout": "30m"}
    )
    fake_slack.wait_calls("chat.postMessage")
    server.stop()
    again = ProviderServer(database, rules=rules_file, slack=server._slack, webhook_backoff=0.05)
    try:
        again.start()
        assert (
            200
            == Api(again.url, people["bob"]).decide(made["id"], {"status": "approved"}).status_code
        )
        message = _message_says(fake_slack, "Approved")
        (posted,) = fake_slack.of("chat.postMessage")
        # The stop may cut the post's row before it was settled: it is redone as an update.
        updates = {(c.body["channel"], c.body["ts"]) for c in fake_slack.wait_calls("chat.update")}
        assert {(CHANNEL, "1700000000.000001")} == updates
        assert message == fake_slack.messages[(CHANNEL, "1700000000.000001")]
        del posted
    finally:
        again.close()
        server.close()


def test_a_stop_while_the_post_is_in_flight_waits_for_it_and_keeps_its_ts(
    database: Any, fake_slack: FakeSlack, rules_file: Path
) -> None:
    """A post Slack answers during the stop is recorded: after a restart there is no second post."""
    fake_slack.delay = 1.0  # Slack takes a second to answer the post
    server = start(database, fake_slack, rules_file)
    tokens = server.first_start_tokens
    assert tokens is not None
    people = add_people(server)
    made = Api(server.url, tokens.instance).new(
        body={"tool": "small_refund", "arguments": {"amount": 1}, "timeout": "30m"}
    )
    assert fake_slack.arrived.wait(10)  # the post is in flight, unanswered
    server.stop()
    assert 1 == len(fake_slack.of("chat.postMessage"))  # the stop waited for its answer
    fake_slack.delay = 0.0
    again = ProviderServer(database, rules=rules_file, slack=server._slack, webhook_backoff=0.05)
    try:
        again.start()
        Api(again.url, people["bob"]).decide(made["id"], {"status": "approved"})
        message = _message_says(fake_slack, "Approved")
        assert 1 == len(fake_slack.of("chat.postMessage"))
        assert {(CHANNEL, "1700000000.000001")} == {
            (c.body["channel"], c.body["ts"]) for c in fake_slack.wait_calls("chat.update")
        }
        assert message == fake_slack.messages[(CHANNEL, "1700000000.000001")]
    finally:
        again.close()
        server.close()


def test_an_update_slack_can_never_accept_is_given_up_at_once(team: SlackTeam) -> None:
    """``message_not_found`` on an update is not retried for a day: the row is given up."""
    made = team.new()
    team.slack.wait_calls("chat.postMessage")
    team.slack.script.append((200, {"ok": False, "error": "message_not_found"}, {}))
    team.reviewer("alice").decide(made["id"], {"status": "approved"})
    assert team.slack.wait_for(
        lambda _: any(row["action"] == "slack.given_up" for row in team.audit(made["id"]))
    )
    # Given up is settled: the outbox claims only pending rows, so none calls Slack again
    # (a row kept for a retry would still be pending here, its backoff 0.05 s).
    rows = [
        item
        for item in team.server.store.list_outbox(channels=("webhooks", "slack"))
        if item.request_id == made["id"]
    ]
    assert rows and all("pending" != item.state for item in rows), rows
    assert 1 == len(team.slack.of("chat.update"))


def test_a_bot_outside_the_channel_is_retried_and_logged_with_the_fix(
    team: SlackTeam, caplog: pytest.LogCaptureFixture
) -> None:
    """``not_in_channel`` is a setup error: logged as an error saying what to do, then retried."""
    team.slack.script.append((200, {"ok": False, "error": "not_in_channel"}, {}))
    with caplog.at_level(logging.ERROR, logger="approval_guard.provider"):
        team.new()
        calls = team.slack.wait_calls("chat.postMessage", 2)
    assert 2 == len(calls)
    assert any("invite it" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert TOKEN not in caplog.text
