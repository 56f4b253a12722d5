"""API 1.3 in Slack: the agent's stated reason shown inert, and a batch's "Approve all N"."""

from __future__ import annotations

from typing import Any

from approval_guard.provider.channels.slack.blocks import APPROVE_ALL, DENY_ALL
from tests.provider.channels.slack.conftest import SlackTeam
from tests.support.api import Api
from tests.support.slack_clicks import block_action, post, view_submission

HOSTILE = (
    "<!channel> <@U0BOSS> <https://evil.example|click to approve> *approve now* "
    "&lt; `code` ```block``` <script>alert(1)</script>\u202eevil"
)


def _message_of(team: SlackTeam, n: int) -> dict[str, Any]:
    """The blocks of the ``n``-th posted message (1-based)."""
    call = team.slack.wait_calls("chat.postMessage", n)[n - 1]
    return dict(call.body)


def _batch_actions(message: dict[str, Any]) -> list[dict[str, Any]]:
    for block in message["blocks"]:
        if block.get("block_id") == "ag_batch":
            return list(block["elements"])
    return []


def _said(message: dict[str, Any]) -> list[str]:
    """The texts of the sections labelled as the agent's own words."""
    texts = [block.get("text", {}).get("text", "") for block in message["blocks"]]
    return [one for one in texts if "The agent says" in one]


def test_the_agents_reason_is_shown_labelled_above_the_arguments(team: SlackTeam) -> None:
    """A section "The agent says:" comes before the arguments' first section."""
    team.new(context="Duplicate charge, ticket 4411.")
    blocks = _message_of(team, 1)["blocks"]
    texts = [block.get("text", {}).get("text", "") for block in blocks]
    said = next(i for i, one in enumerate(texts) if "The agent says:" in one)
    first_argument = next(i for i, one in enumerate(texts) if "payment_id" in one)
    assert said < first_argument
    assert "```Duplicate charge, ticket 4411.```" in texts[said]


def test_a_hostile_reason_is_inert_in_slack(team: SlackTeam) -> None:
    """No mention, link or broadcast survives: <, > and & are entities, inside a code block."""
    team.new(context=HOSTILE)
    message = _message_of(team, 1)
    (section,) = _said(message)
    assert "<!channel>" not in section and "<@U0BOSS>" not in section
    assert "<https://" not in section and "<script>" not in section
    assert "&lt;!channel&gt;" in section
    assert "&amp;lt;" in section
    assert "\u202e" not in section and "\\u202e" in section
    body = section.split("\n", 1)[1]
    assert body.startswith("```") and body.endswith("```")
    assert "`" not in body[3:-3]  # no backtick ends the block early
    assert "<!channel>" not in message["text"]


def test_a_very_long_hostile_reason_fits_one_section(team: SlackTeam) -> None:
    """1,000 '<' (5,000 characters once escaped) are cut within Slack's 3,000, never mid-entity."""
    team.new(context="<" * 1000)
    message = _message_of(team, 1)
    (section,) = _said(message)
    assert len(section) <= 3000
    assert section.endswith("&lt;\u2026```")


def test_a_batch_message_decides_exactly_the_ids_it_listed(team: SlackTeam) -> None:
    """Approve all 2 on the second message approves those two, never the third that joined later."""
    first = team.new(batch="turn-1")
    assert [] == _batch_actions(_message_of(team, 1))  # alone when it was posted
    second = team.new(batch="turn-1")
    buttons = _batch_actions(_message_of(team, 2))
    assert ["Approve all 2", "Deny all 2\u2026"] == [b["text"]["text"] for b in buttons]
    assert f"{first['id']},{second['id']}" == buttons[0]["value"]
    later = team.new(batch="turn-1")
    _message_of(team, 3)
    answer = post(team.url, block_action("U0ALICE", APPROVE_ALL, buttons[0]["value"]))
    assert 200 == answer.status_code
    assert "approved" == team.get(first["id"])["status"]
    assert "approved" == team.get(second["id"])["status"]
    assert "pending" == team.get(later["id"])["status"]
    reply = team.slack.wait_calls("chat.postEphemeral")[0].body["text"]
    lines = reply.split("\n")
    assert lines[0] == "Approve all 2:"
    assert lines[1].startswith(f"`{first['id']}`: Approved.")
    assert lines[2].startswith(f"`{second['id']}`: Approved.")
    for one in (first, second):
        (row,) = team.decisions(one["id"])
        assert ("alice", "slack") == (row["actor"], row["detail"]["channel"])


def test_a_refused_id_in_a_batch_never_stops_the_others(team: SlackTeam) -> None:
    """alice may not approve delete_user: that line says why, the two refunds are approved."""
    made = [team.new(batch="t"), team.new("delete_user", batch="t"), team.new(batch="t")]
    buttons = _batch_actions(_message_of(team, 3))
    assert "Approve all 3" == buttons[0]["text"]["text"]
    post(team.url, block_action("U0ALICE", APPROVE_ALL, buttons[0]["value"]))
    reply = team.slack.wait_calls("chat.postEphemeral")[0].body["text"]
    lines = reply.split("\n")[1:]
    assert [f"`{one['id']}`" for one in made] == [line.split(":", 1)[0] for line in lines]
    assert "Not recorded" in lines[1] and "admin" in lines[1]
    assert ["approved", "pending", "approved"] == [team.get(one["id"])["status"] for one in made]


def test_deny_all_opens_one_modal_and_denies_each_listed_id(team: SlackTeam) -> None:
    """Deny all 2… asks one reason; submitting it denies the two with it, each audited."""
    made = [team.new(batch="t") for _ in range(2)]
    buttons = _batch_actions(_message_of(team, 2))
    post(team.url, block_action("U0BOB", DENY_ALL, buttons[1]["value"]))
    view = team.slack.wait_calls("views.open")[0].body["view"]
    assert ["pending", "pending"] == [team.get(one["id"])["status"] for one in made]
    post(team.url, view_submission("U0BOB", view, {"reason": "not today"}))
    for one in made:
        done = team.get(one["id"])
        assert ("denied", "not today", "bob") == (
            done["status"],
            done["decision"]["note"],
            done["decision"]["decided_by"],
        )


def test_an_unlinked_user_clicking_approve_all_records_nothing(team: SlackTeam) -> None:
    """A Slack user linked to no reviewer is told so for each id; nothing is decided."""
    made = [team.new(batch="t") for _ in range(2)]
    buttons = _batch_actions(_message_of(team, 2))
    post(team.url, block_action("U0NOBODY", APPROVE_ALL, buttons[0]["value"]))
    reply = team.slack.wait_calls("chat.postEphemeral")[0].body["text"]
    assert 2 == reply.count("not linked")
    assert ["pending", "pending"] == [team.get(one["id"])["status"] for one in made]


def test_two_agents_batches_of_one_name_are_two_batches(team: SlackTeam) -> None:
    """Another instance credential's "turn-1" is not listed under this agent's."""
    team.new(batch="turn-1")
    other = Api(team.url, team.server.store.create_credential("instance", "agent-2"))
    body = {"tool": "small_refund", "arguments": {"a": 1}, "timeout": "30m", "batch": "turn-1"}
    other.new(body=body)
    assert [] == _batch_actions(_message_of(team, 2))
