"""Signed interactions of odd shapes: each is a 4xx or an acknowledgement, never a 500."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from tests.provider.slack.conftest import SlackTeam
from tests.support.slack_clicks import post


def test_a_deeply_nested_payload_is_400_never_500(team: SlackTeam) -> None:
    """A signed payload nested deeper than Python's JSON parser allows is refused as bad input."""
    deep = "[" * 5_000 + "]" * 5_000
    body = urlencode({"payload": deep}).encode()
    answer = post(team.url, body=body)
    assert 400 == answer.status_code


def test_a_view_with_deeply_nested_metadata_is_acknowledged_and_records_nothing(
    team: SlackTeam,
) -> None:
    """Private metadata nested too deep to parse is ignored, not a crash."""
    made = team.new()
    payload = {
        "type": "view_submission",
        "user": {"id": "U0ALICE"},
        "view": {"callback_id": "ag_deny", "private_metadata": "[" * 5_000},
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    answer = post(team.url, body=body)
    assert 200 == answer.status_code
    assert "pending" == team.get(made["id"])["status"]
