"""The request's Discord message through the outbox: posted, edited, retried, given up."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.provider.channels.discord.conftest import DiscordTeam, discord_channel, make_team, start
from tests.support.api import Api, wait_for
from tests.support.fake_discord import CHANNEL, RATE_LIMITED, TOKEN, UNAUTHORIZED, FakeDiscord
from tests.support.fakes import ShiftedClock


def test_a_new_request_is_posted_once_with_its_reason_arguments_and_buttons(
    team: DiscordTeam,
) -> None:
    """One Create Message to the channel: tool, the agent's reason, arguments, two buttons."""
    made = team.new(context="The customer was charged twice.")
    message = team.posted()
    (post,) = team.discord.of("POST")
    assert post.path == f"/api/v10/channels/{CHANNEL}/messages"
    assert post.headers["authorization"] == f"Bot {TOKEN}"
    assert "**Approval needed:** `small_refund`" in message["content"]
    assert made["id"] in message["content"]
    (embed,) = message["embeds"]
    assert "The customer was charged twice." in embed["description"]
    assert {one["name"] for one in embed["fields"]} == {"`payment_id`", "`amount`"}
    labels = [one["label"] for one in message["components"][0]["components"]]
    assert labels == ["Approve", "Deny\u2026"]
    assert post.body["allowed_mentions"] == {"parse": []}


def test_redacted_values_are_shown_as_redacted_only_where_the_create_said(
    team: DiscordTeam,
) -> None:
    """A marker at a path in ``redacted`` reads "redacted"; the same shape elsewhere is JSON."""
    marker = {"$redacted": "1a2b3c4d5e6f"}
    response = team.instance.create(
        tool="small_refund", arguments={"card": marker, "memo": marker}, redacted=["/card"]
    )
    assert response.status_code == 201, response.text
    fields = {one["name"]: one["value"] for one in team.posted()["embeds"][0]["fields"]}
    assert fields["`card`"] == "`\u2039redacted 1a2b3c4d5e6f\u203a`"
    assert fields["`memo`"] == '`{"$redacted":"1a2b3c4d5e6f"}`'


def test_the_message_follows_an_api_decision(team: DiscordTeam) -> None:
    """Decided on the API: the message is edited (PATCH) and its buttons removed."""
    made = team.new()
    message_id = team.posted()["id"]
    answer = team.reviewer("alice").decide(made["id"], {"status": "denied", "note": "no"})
    assert answer.status_code == 200, answer.text
    edited = team.discord.wait_message(lambda m: m["components"] == [])
    assert "Denied" in edited["content"]
    patch = team.discord.of("PATCH")[-1]
    assert patch.path == f"/api/v10/channels/{CHANNEL}/messages/{message_id}"
    assert len(team.discord.of("POST")) == 1


def test_the_message_follows_expiry_and_cancellation(team: DiscordTeam) -> None:
    """Expired (the clock moved past its deadline) and cancelled: edited, buttons gone."""
    expiring = team.new(timeout="2m")
    team.posted()
    team.clock.advance(180)
    team.get(expiring["id"])
    edited = team.discord.wait_message(lambda m: m["components"] == [])
    assert "Expired" in edited["content"]
    team.discord.messages.clear()
    cancelled = team.new()
    team.posted()
    assert team.instance.cancel(cancelled["id"], {"reason": "not needed"}).status_code == 200
    edited = team.discord.wait_message(lambda m: m["components"] == [])
    assert "Cancelled" in edited["content"]


def test_a_429_is_retried_after_discords_retry_after(team: DiscordTeam) -> None:
    """Two 429s, then the post goes through: one message, posted on the third try."""
    team.discord.script += [RATE_LIMITED, RATE_LIMITED]
    team.new()
    message = team.posted()
    assert [call.status for call in team.discord.of("POST")] == [429, 429, 200]
    assert len(message["components"]) == 1


def test_an_outage_is_retried_and_nothing_is_lost(team: DiscordTeam) -> None:
    """Discord answering 502: the request is created and decided anyway; then all arrives."""
    team.discord.down = True
    made = team.new()
    team.discord.wait_calls("POST", 2)
    answer = team.reviewer("alice").decide(made["id"], {"status": "approved"})
    assert answer.status_code == 200, answer.text
    team.discord.down = False
    edited = team.discord.wait_message(lambda m: m["components"] == [])
    assert "Approved" in edited["content"]


def test_a_401_is_given_up_at_once_audited_and_the_token_never_logged(
    database: Any,
    discord: FakeDiscord,
    rules_file: Path,
    provider_clock: ShiftedClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A revoked token: one try, a channel.given_up audit row, and no log line holds the token."""
    caplog.set_level(logging.DEBUG)
    discord.script.append(UNAUTHORIZED)
    team = make_team(database, discord, rules_file, provider_clock)
    try:
        made = team.new()
        discord.wait_calls("POST", 1)
        team.wait_given_up(made["id"])
        assert len(discord.of("POST")) == 1
        assert discord.messages == {}
    finally:
        team.server.close()
    assert TOKEN not in caplog.text
    assert all(TOKEN not in str(record.args) for record in caplog.records)


def test_an_edit_of_a_deleted_message_is_given_up(team: DiscordTeam) -> None:
    """Someone deleted the message: the edit's 404 Unknown Message is permanent."""
    made = team.new()
    team.posted()
    team.discord.messages.clear()
    assert team.reviewer("alice").decide(made["id"], {"status": "approved"}).status_code == 200
    team.discord.wait_calls("PATCH", 1)
    team.wait_given_up(made["id"])
    assert len(team.discord.of("PATCH")) == 1


def test_after_a_restart_an_edit_finds_the_message_posted_before(
    database: Any, discord: FakeDiscord, rules_file: Path, provider_clock: ShiftedClock
) -> None:
    """The message's id is kept in the store: a decision after a restart edits that message."""
    team = make_team(database, discord, rules_file, provider_clock)
    try:
        made = team.new()
        message_id = team.posted()["id"]
        team.server.stop()
        again = start(database, discord_channel(discord), rules_file, clock=provider_clock)
        try:
            answer = Api(again.url, team.tokens["bob"]).decide(made["id"], {"status": "approved"})
            assert answer.status_code == 200, answer.text
            edited = discord.wait_message(lambda m: m["components"] == [])
        finally:
            again.close()
    finally:
        team.server.close()
    assert edited["id"] == message_id and "Approved" in edited["content"]
    assert len(discord.of("POST")) == 1
    assert {call.path for call in discord.of("PATCH")} == {
        f"/api/v10/channels/{CHANNEL}/messages/{message_id}"
    }


def test_a_post_held_in_flight_is_sent_once_when_discord_answers(team: DiscordTeam) -> None:
    """Discord slow to answer the post: the outbox never posts the same message twice at once."""
    team.discord.hold(True)
    made = team.new()
    assert team.discord.arrived.wait(15)
    team.discord.hold(False)
    message = team.posted()
    assert made["id"] in message["content"]
    assert len(team.discord.of("POST")) == 1


def test_a_post_that_timed_out_but_reached_discord_is_not_posted_twice(
    database: Any, discord: FakeDiscord, rules_file: Path, provider_clock: ShiftedClock
) -> None:
    """A post Discord made after the send's deadline ran out: its retry finds it, one message."""
    channel = discord_channel(discord)
    channel.deadline = 1.0  # the outbox gives the held post up after 1 s and sends it again
    server = start(database, channel, rules_file, clock=provider_clock)
    try:
        first = server.first_start_tokens
        assert first is not None
        discord.hold(True)
        made = Api(server.url, first.instance).new(
            body={"tool": "small_refund", "arguments": {"amount": 1}, "timeout": "30m"}
        )
        # The retry arrives while the first post is still held: both reach Discord.
        assert discord.wait_for(lambda fake: fake.arrivals >= 2, timeout=20)
        discord.hold(False)
        posts = discord.wait_calls("POST", 2)
        assert posts[0].body["nonce"] == posts[1].body["nonce"]
        assert posts[0].body["enforce_nonce"] is True
        message = discord.wait_message(lambda message: made["id"] in message["content"])
        assert len(discord.messages) == 1
        # The message the request keeps is the one Discord has: a decision edits it.
        assert wait_for(
            lambda: server.store.channel_message("discord", made["id"]) == message["id"],
            timeout=15,
            what="the message id was never kept",
        )
    finally:
        discord.hold(False)
        server.close()
