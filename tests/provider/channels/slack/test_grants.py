"""Slack's "Approve and allow for…" (API 1.3): a same-scope standing grant, one decision path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.provider.channels.slack.conftest import RULES, SlackTeam
from tests.support.slack_clicks import block_action, post, view_submission

GRANT = "ag_grant"
MORE_RULES = """
[tools.close_account]
approvers = ["payments"]
grants = false

[[tools.send_receipt.auto]]
name = "receipts in GBP"
decision = "approve"
match = { currency = { in = ["GBP"] } }
"""


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(RULES + MORE_RULES)
    return path


def _texts(message: dict[str, Any]) -> str:
    return json.dumps(message["blocks"], ensure_ascii=False)


def _buttons(message: dict[str, Any]) -> list[str]:
    return [
        element["action_id"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]


def _posted(team: SlackTeam, n: int) -> dict[str, Any]:
    """The ``n``-th message posted to the channel (1-based), once it is."""
    body: dict[str, Any] = team.slack.wait_calls("chat.postMessage", n)[n - 1].body
    return body


def _open_grant(team: SlackTeam, request_id: str, user: str = "U0ALICE") -> Any:
    before = len(team.slack.of("views.open"))
    post(team.url, block_action(user, GRANT, request_id))
    return team.slack.wait_calls("views.open", before + 1)[-1].body["view"]


def _submit(user: str, view: dict[str, Any], duration: str, uses: str = "") -> dict[str, Any]:
    """The grant modal submitted with ``duration`` chosen and ``uses`` typed."""
    payload: dict[str, Any] = view_submission(user, view, {"uses": uses, "note": ""})
    payload["view"]["state"]["values"]["for"] = {
        "for": {"type": "static_select", "selected_option": {"value": duration}}
    }
    return payload


def _grants(team: SlackTeam) -> list[dict[str, Any]]:
    answer = requests.get(
        f"{team.url}/v1/grants",
        headers={"Authorization": f"Bearer {team.tokens['carol']}"},
        timeout=10,
    )
    assert 200 == answer.status_code, answer.text
    return list(answer.json()["grants"])


def test_approve_and_allow_gives_a_same_scope_grant_that_decides_the_next_call(
    team: SlackTeam,
) -> None:
    """The button opens a modal; its submission approves and gives a grant; a repeat is covered."""
    made = team.new()
    assert GRANT in _buttons(_posted(team, 1))
    view = _open_grant(team, made["id"])
    assert "ag_grant" == view["callback_id"]
    choices = [o["value"] for o in view["blocks"][1]["element"]["options"]]
    assert ["5m", "15m", "30m", "1h"] == choices  # within the default max_grant, 1h
    assert "`payment_id` is exactly" not in _texts(view)  # words, not code spans of names
    assert 'payment_id is exactly \\"payment_123\\"' in _texts(view)

    answer = post(team.url, _submit("U0ALICE", view, "30m", uses="2"))
    assert 200 == answer.status_code
    assert "approved" == team.get(made["id"])["status"]
    [grant] = _grants(team)
    assert (grant["granted_by"], grant["uses"], grant["match"]) == (
        ["alice"],
        2,
        {"amount": "same", "payment_id": "same"},
    )
    assert grant["from_request"] == made["id"]
    assert team.slack.wait_for(
        lambda s: any(f"Standing grant {grant['id']}" in t for t in s.ephemeral_texts())
    )

    again = team.new()
    assert ("approved", grant["id"]) == (again["status"], again["decision"]["grant"]["id"])
    shown = _posted(team, 2)
    assert f"by grant {grant['id']} of alice" in _texts(shown)
    assert GRANT not in _buttons(shown) and not _buttons(shown)

    other = team.new(arguments={"payment_id": "payment_123", "amount": 4901})
    assert "pending" == other["status"]
    audit = [row["action"] for row in team.audit(made["id"])]
    assert "grant.given" in audit
    [decision] = team.decisions(made["id"])
    assert ("alice", "slack") == (decision["actor"], decision["detail"]["channel"])


def test_a_bad_uses_value_is_shown_in_the_modal_and_records_nothing(team: SlackTeam) -> None:
    """Uses that are not a whole number from 1 are an error in the modal; nothing is decided."""
    made = team.new()
    view = _open_grant(team, made["id"])
    for typed in ("0", "two", "\u0663", "-1"):
        answer = post(team.url, _submit("U0ALICE", view, "30m", uses=typed))
        assert "errors" == answer.json()["response_action"], typed
        assert "uses" in answer.json()["errors"]
    assert "pending" == team.get(made["id"])["status"]
    assert [] == _grants(team)


def test_a_duration_beyond_max_grant_records_nothing(team: SlackTeam) -> None:
    """A forged choice past the tool's max_grant is refused in the modal."""
    made = team.new()
    view = _open_grant(team, made["id"])
    answer = post(team.url, _submit("U0ALICE", view, "2h"))
    assert {"for"} == set(answer.json()["errors"])
    assert "pending" == team.get(made["id"])["status"]


def test_no_grant_is_offered_or_opened_where_grants_are_off(team: SlackTeam) -> None:
    """grants = false: no button, and a forged click is refused with a reply."""
    made = team.new(tool="close_account", arguments={"account": "a1"})
    assert GRANT not in _buttons(_posted(team, 1))
    post(team.url, block_action("U0ALICE", GRANT, made["id"]))
    assert team.slack.wait_for(
        lambda s: any("standing grants are turned off" in t for t in s.ephemeral_texts())
    )
    assert [] == team.slack.of("views.open")
    assert "pending" == team.get(made["id"])["status"]


def test_self_approval_off_refuses_the_grant_modal(team: SlackTeam) -> None:
    """A request made for alice: alice may not approve it, with or without a grant."""
    made = team.new(requested_by="alice")
    post(team.url, block_action("U0ALICE", GRANT, made["id"]))
    assert team.slack.wait_for(lambda s: any("Not recorded" in t for t in s.ephemeral_texts()))
    assert [] == team.slack.of("views.open")
    assert [] == _grants(team)


def test_the_grant_modal_shows_hostile_values_escaped(team: SlackTeam) -> None:
    """Slack markup and a bidi override in a value are escaped in the modal's scope words."""
    made = team.new(arguments={"memo": "<!channel> a\u202eb", "amount": 1})
    view = _open_grant(team, made["id"])
    words = _texts(view)
    assert "<!channel>" not in words and "\u202e" not in words
    assert "&lt;!channel&gt;" in words and "a\\\\u202eb" in words


def test_a_request_decided_by_a_rule_is_posted_as_decided_by_it(team: SlackTeam) -> None:
    """A rules-file auto-decision's request is posted already decided, naming the rule."""
    made = team.new(tool="send_receipt", arguments={"currency": "GBP"})
    assert "approved" == made["status"]
    shown = _posted(team, 1)
    assert "by rule receipts in GBP" in _texts(shown)
    assert [] == _buttons(shown)
