"""Signed interactions of odd shapes: each is a 4xx or an acknowledgement, never a 500."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import requests

from approval_guard.provider.channels.slack.blocks import APPROVE, EDIT
from tests.provider.channels.slack.conftest import SlackTeam
from tests.support.fake_slack import SIGNING_SECRET
from tests.support.slack_clicks import block_action, form, post, view_submission


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


def test_timestamp_headers_that_are_not_a_recent_number_are_401_and_record_nothing(
    team: SlackTeam,
) -> None:
    """A timestamp non-numeric, negative, huge, fractional or far off is 401, signed or not."""
    made = team.new()
    body = form(block_action("U0ALICE", APPROVE, made["id"]))
    now = int(time.time())
    for stamp in ("soon", "-1", f"-{now}", "9" * 40, f"{now}0", f"{now}.5", "0"):
        base = b"v0:" + stamp.encode() + b":" + body
        mac = hmac.new(SIGNING_SECRET.encode(), base, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": "v0=" + mac,
        }
        answer = requests.post(
            f"{team.url}/slack/interactions", data=body, headers=headers, timeout=10
        )
        assert 401 == answer.status_code, stamp
    assert "pending" == team.get(made["id"])["status"]
    assert [] == team.decisions(made["id"])


def test_an_edit_longer_than_the_input_allows_is_refused_never_cut(team: SlackTeam) -> None:
    """A value past the modal's 3,000 characters is an error in the modal, never approved cut."""
    made = team.new(editable=["amount"])
    before = len(team.slack.of("views.open"))
    post(team.url, block_action("U0ALICE", EDIT, made["id"]))
    view = team.slack.wait_calls("views.open", before + 1)[-1].body["view"]
    answer = post(team.url, view_submission("U0ALICE", view, {"arg0": "7" * 3001}))
    body = answer.json()
    assert "errors" == body["response_action"]
    assert "3000" in body["errors"]["arg0"].replace(",", "")
    assert "pending" == team.get(made["id"])["status"]
    assert [] == team.decisions(made["id"])


def test_a_requester_name_cannot_format_the_message(team: SlackTeam) -> None:
    """The agent's ``requested_by`` is shown in a code span: no bold, italics or code of its own."""
    team.new(requested_by="x` *Approved by security* _ok_ ~no~ <!here>")
    call = team.slack.wait_calls("chat.postMessage")[0]
    (context,) = [b for b in call.body["blocks"] if b["type"] == "context"]
    line = context["elements"][0]["text"]
    assert "asked by `x\u02cb *Approved by security* _ok_ ~no~ &lt;!here&gt;`" in line
