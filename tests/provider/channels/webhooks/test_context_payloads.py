"""API 1.3 in webhooks: ``batch`` and ``context`` in the standard payload; quoted in Slack's."""

from __future__ import annotations

import json
from pathlib import Path

from approval_guard.provider import ProviderServer
from approval_guard.provider.channels.webhooks.signing import WebhookTarget
from tests.support.api import REFUND, Api
from tests.support.webhook_receiver import Receiver

HOSTILE = "<!channel> <https://evil.example|approve> *now* `x` \u202e & more"


def _created(tmp_path: Path, receiver: Receiver, body_format: str, **extra: str) -> dict:
    target = WebhookTarget(receiver.url, None, body_format)
    with ProviderServer(str(tmp_path / "a.db"), webhooks=(target,), webhook_backoff=0.05) as server:
        tokens = server.first_start_tokens
        assert tokens is not None
        body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m", **extra}
        Api(server.url, tokens.instance).new(body=body)
        (delivery,) = receiver.wait_count(1)
    return dict(delivery.json)


def test_the_standard_payload_carries_batch_and_context(tmp_path: Path, receiver: Receiver) -> None:
    """``data.batch`` and ``data.context`` are the create's values, exactly."""
    got = _created(tmp_path, receiver, "standard", batch="turn-3", context=HOSTILE)
    assert ("turn-3", HOSTILE) == (got["data"]["batch"], got["data"]["context"])


def test_a_payload_without_them_has_no_such_keys(tmp_path: Path, receiver: Receiver) -> None:
    """A 1.2 create's events are as before: neither key."""
    data = _created(tmp_path, receiver, "standard")["data"]
    assert "batch" not in data and "context" not in data


def test_the_slack_format_quotes_the_agent_inert_above_the_arguments(
    tmp_path: Path, receiver: Receiver
) -> None:
    """Labelled, in a code block, entities for <>&, before the arguments' section."""
    got = _created(tmp_path, receiver, "slack", context=HOSTILE)
    texts = [block.get("text", {}).get("text", "") for block in got["blocks"]]
    said = next(i for i, one in enumerate(texts) if one.startswith("*The agent says:*"))
    assert said < next(i for i, one in enumerate(texts) if "payment_id" in one)
    shown = texts[said]
    assert "<!channel>" not in shown and "<https://" not in shown
    assert "&lt;!channel&gt;" in shown and "&amp; more" in shown
    assert "\\u202e" in shown and "\u202e" not in json.dumps(got, ensure_ascii=False)
    assert shown.endswith("```") and "`" not in shown.split("```")[1]
