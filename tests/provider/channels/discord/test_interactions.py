"""``POST /discord/interactions`` through a real provider: signed clicks decide, nothing else."""

from __future__ import annotations

import json

from tests.provider.channels.discord.conftest import DiscordTeam
from tests.support import fake_discord


def test_ping_is_answered_pong(team: DiscordTeam) -> None:
    """Discord's endpoint check, signed: ``{"type": 1}``."""
    answer = team.interact(fake_discord.ping())
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"type": 1}


def test_approve_decides_and_the_message_loses_its_buttons(team: DiscordTeam) -> None:
    """Alice's click approves through the one decision path; the reply is the updated message."""
    made = team.new()
    assert len(team.posted()["components"][0]["components"]) == 2
    answer = team.click("alice", "Approve")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["type"] == 7
    assert body["data"]["components"] == []
    assert "Approved:** `small_refund` by `alice`" in body["data"]["content"]
    assert team.get(made["id"])["status"] == "approved"
    (row,) = team.decisions(made["id"])
    assert row["action"] == "request.approval" and row["actor"] == "alice"
    assert row["detail"]["channel"] == "discord"
    assert row["detail"]["channel_user"] == team.user("alice")
    message = team.discord.wait_message(lambda m: m["components"] == [])
    assert "Approved:** `small_refund` by `alice`" in message["content"]


def test_deny_opens_a_modal_and_its_reason_denies(team: DiscordTeam) -> None:
    """Deny… answers a modal (type 9); its submission denies with the reason as the note."""
    made = team.new()
    opened = team.click("bob", "Deny")
    assert opened.status_code == 200, opened.text
    modal = opened.json()
    assert modal["type"] == 9
    assert team.get(made["id"])["status"] == "pending"  # nothing decided by opening it
    submitted = team.interact(
        fake_discord.submit(team.user("bob"), modal, {"reason": "wrong customer"}, team.posted())
    )
    assert submitted.status_code == 200, submitted.text
    assert submitted.json()["type"] == 7
    state = team.get(made["id"])
    assert state["status"] == "denied"
    assert state["decision"]["note"] == "wrong customer"
    message = team.discord.wait_message(lambda m: m["components"] == [])
    assert "Denied:** `small_refund` by `bob`" in message["content"]
    assert "wrong customer" in message["content"]


def test_an_empty_reason_records_nothing(team: DiscordTeam) -> None:
    """A modal submitted with only spaces is refused (ephemeral): the agent must be told why."""
    made = team.new()
    modal = team.click("bob", "Deny").json()
    answer = team.interact(fake_discord.submit(team.user("bob"), modal, {"reason": "  "}, None))
    assert answer.json()["type"] == 4 and answer.json()["data"]["flags"] == 64
    assert team.get(made["id"])["status"] == "pending"
    assert team.decisions(made["id"]) == []


def test_a_bad_or_missing_signature_is_401_and_records_nothing(team: DiscordTeam) -> None:
    """Another key's signature, a changed body, no headers at all: 401, nothing decided."""
    made = team.new()
    message = team.posted()
    approve = fake_discord.button(message, "Approve")
    interaction = fake_discord.click(team.user("alice"), message, approve)
    raw = json.dumps(interaction).encode()
    stamp = int(team.clock().timestamp())
    other = fake_discord.FakeDiscord()  # another application's key
    cases = [
        team.interact(interaction, signature=other.sign(raw, str(stamp)), body=raw),
        team.interact(interaction, signature="00" * 64),
        team.interact(interaction, signature=team.discord.sign(raw, str(stamp)), body=raw + b" "),
        team.interact(fake_discord.ping(), signature="nothex"),
    ]
    for answer in cases:
        assert answer.status_code == 401, answer.text
    unsigned = team.discord  # no signature headers at all
    import requests

    answer = requests.post(team.endpoint, data=raw, timeout=10)
    assert answer.status_code == 401
    assert team.get(made["id"])["status"] == "pending"
    assert team.decisions(made["id"]) == []
    assert unsigned.wait_message(lambda m: len(m["components"]) == 1)


def test_a_timestamp_more_than_five_minutes_off_is_401(team: DiscordTeam) -> None:
    """Signed by Discord's key, but 301 s old or ahead of the provider's clock: 401."""
    made = team.new()
    message = team.posted()
    approve = fake_discord.button(message, "Approve")
    now = int(team.clock().timestamp())
    for stamp in (now - 301, now + 301):
        answer = team.interact(
            fake_discord.click(team.user("alice"), message, approve), timestamp=stamp
        )
        assert answer.status_code == 401, answer.text
    assert team.decisions(made["id"]) == []
    answer = team.interact(
        fake_discord.click(team.user("alice"), message, approve), timestamp=now - 250
    )
    assert answer.status_code == 200 and answer.json()["type"] == 7


def refused(team: DiscordTeam, answer: object) -> str:
    import requests

    assert isinstance(answer, requests.Response)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["type"] == 4 and body["data"]["flags"] == 64, body
    return str(body["data"]["content"])


def test_an_unknown_or_removed_user_is_refused_ephemerally(team: DiscordTeam) -> None:
    """A user linked to nobody, or to a removed reviewer: an ephemeral reply, nothing recorded."""
    made = team.new()
    text = refused(team, team.click("99999999999999999", "Approve"))
    assert "not linked" in text and "--discord-user 99999999999999999" in text
    assert "not linked" in refused(team, team.click("99999999999999999", "Deny"))
    team.server.store.remove_reviewer("alice")
    assert "not linked" in refused(team, team.click("alice", "Approve"))
    assert team.decisions(made["id"]) == []
    assert team.get(made["id"])["status"] == "pending"


def test_a_role_the_rule_does_not_name_is_refused_ephemerally(team: DiscordTeam) -> None:
    """Carol (admin) on a payments tool: refused, both on Approve and on opening Deny…."""
    made = team.new()
    assert "payments" in refused(team, team.click("carol", "Approve"))
    assert "payments" in refused(team, team.click("carol", "Deny"))
    assert team.decisions(made["id"]) == []


def test_self_approval_is_refused_ephemerally(team: DiscordTeam) -> None:
    """Bob asked for it (requested_by): his own Approve is refused, nothing recorded."""
    made = team.new(requested_by="bob")
    assert "themselves" in refused(team, team.click("bob", "Approve"))
    assert team.decisions(made["id"]) == []
    assert team.get(made["id"])["status"] == "pending"


def test_a_click_on_a_request_no_longer_pending_is_refused(team: DiscordTeam) -> None:
    """After alice approved, bob's click on the same (old) message is refused: stale."""
    made = team.new()
    message = team.posted()
    approve = fake_discord.button(message, "Approve")
    deny = fake_discord.button(message, "Deny")
    assert team.click("alice", "Approve").json()["type"] == 7
    for custom_id in (approve, deny):
        text = refused(
            team, team.interact(fake_discord.click(team.user("bob"), message, custom_id))
        )
        assert "already approved" in text
    assert len(team.decisions(made["id"])) == 1


def test_the_same_signed_interaction_twice_records_once(team: DiscordTeam) -> None:
    """A replay of one signed click (same id, same bytes, within 5 minutes) records nothing."""
    made = team.new(tool="issue_refund")  # two approvals: a replay could count twice
    message = team.posted()
    interaction = fake_discord.click(
        team.user("alice"), message, fake_discord.button(message, "Approve")
    )
    assert team.interact(interaction).json()["type"] == 7
    text = refused(team, team.interact(interaction))
    assert text.startswith("Not recorded")
    assert len(team.decisions(made["id"])) == 1
    assert team.get(made["id"])["status"] == "pending"


def test_a_quorum_counts_each_click_and_updates_the_message(team: DiscordTeam) -> None:
    """issue_refund needs two: alice's click keeps the buttons (1 of 2), bob's approves."""
    made = team.new(tool="issue_refund")
    first = team.click("alice", "Approve").json()
    assert first["type"] == 7 and len(first["data"]["components"]) == 1
    assert "1 of 2" in first["data"]["content"]
    team.discord.wait_message(lambda m: "1 of 2" in m["content"])
    second = team.click("bob", "Approve").json()
    assert second["data"]["components"] == []
    assert team.get(made["id"])["status"] == "approved"
    assert len(team.decisions(made["id"])) == 2


def test_foreign_buttons_and_other_interaction_types_record_nothing(team: DiscordTeam) -> None:
    """Another app's custom_id, a slash command, junk JSON: no decision, never a 500."""
    made = team.new()
    message = team.posted()
    assert refused(team, team.interact(fake_discord.click(team.user("alice"), message, "x:y")))
    command = {**fake_discord.click(team.user("alice"), message, "x"), "type": 2}
    assert refused(team, team.interact(command))
    for body in (b"[]", b"{", b"\xff", json.dumps({"type": 3}).encode()):
        stamp = str(int(team.clock().timestamp()))
        answer = team.interact(
            {}, body=body, signature=team.discord.sign(body, stamp), timestamp=int(stamp)
        )
        assert answer.status_code == 400, answer.text
    assert team.decisions(made["id"]) == []


def test_a_reason_submitted_after_the_request_ended_is_refused(team: DiscordTeam) -> None:
    """Bob opened Deny…, alice approved meanwhile: bob's reason records nothing, and says why."""
    made = team.new()
    message = team.posted()
    modal = team.click("bob", "Deny").json()
    assert team.click("alice", "Approve").json()["type"] == 7
    answer = team.interact(fake_discord.submit(team.user("bob"), modal, {"reason": "no"}, message))
    assert "already approved" in refused(team, answer)
    assert team.get(made["id"])["status"] == "approved"
    assert [row["actor"] for row in team.decisions(made["id"])] == ["alice"]


def test_a_button_naming_no_request_of_this_provider_records_nothing(team: DiscordTeam) -> None:
    """A well-formed button for an id this provider never made: an ephemeral "no such request"."""
    made = team.new()
    message = team.posted()
    missing = "00000000-0000-4000-8000-000000000000"
    for custom_id in (f"ag_approve:{missing}", f"ag_deny:{missing}"):
        answer = team.interact(fake_discord.click(team.user("alice"), message, custom_id))
        assert "no such request" in refused(team, answer)
    assert team.decisions(made["id"]) == []
