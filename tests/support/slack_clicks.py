"""Slack's side of an interaction for the tests: payloads as Slack sends them, signed, posted."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

import requests

from tests.support.fake_slack import SIGNING_SECRET

CHANNEL = "C0APPROVALS"


def sign(body: bytes, timestamp: int, secret: str = SIGNING_SECRET) -> str:
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def form(payload: dict[str, Any]) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def block_action(user: str, action_id: str, request_id: str, ts: str = "1700000000.000001") -> dict:
    """A ``block_actions`` payload: ``user`` clicked the button ``action_id`` on a message."""
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "team": {"id": "T0TEAM", "domain": "example"},
        "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL, "name": "approvals"},
        "trigger_id": "12345.98765.abcd2358fdea",
        "response_url": "https://hooks.slack.com/actions/T0TEAM/1/xyz",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "ag_actions",
                "value": request_id,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def view_submission(user: str, view: dict[str, Any], values: dict[str, str]) -> dict:
    """A ``view_submission`` of a modal the provider opened, with ``values`` typed per block."""
    state = {
        block["block_id"]: {
            block["element"]["action_id"]: {
                "type": "plain_text_input",
                "value": values.get(block["block_id"]),
            }
        }
        for block in view["blocks"]
        if block["type"] == "input"
    }
    return {
        "type": "view_submission",
        "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "trigger_id": "12345.98765.efgh",
        "view": {
            "id": "V0001",
            "type": "modal",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {"values": state},
        },
    }


def post(
    url: str,
    payload: dict[str, Any] | None = None,
    *,
    body: bytes | None = None,
    timestamp: int | None = None,
    signature: str | None = None,
    secret: str = SIGNING_SECRET,
) -> requests.Response:
    """POST an interaction to ``url``/slack/interactions, signed unless told otherwise."""
    raw = form(payload or {}) if body is None else body
    stamp = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": signature if signature is not None else sign(raw, stamp, secret),
    }
    return requests.post(f"{url}/slack/interactions", data=raw, headers=headers, timeout=10)
