"""API 1.3's ``redacted`` at the local provider: a marker is a redaction only where the create says.

A guard replaces a secret by ``{"$redacted": "<12 hex>"}`` and lists where
(JSON Pointers into the arguments). Any other object of that shape was sent
as it is, and the tool gets it as it is: every place a reviewer looks shows it
as the JSON it is.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import pytest

from approval_guard.provider.channels.webhooks.payloads import slack_payload
from approval_guard.testing import LocalProvider
from tests.support.api import REFUND, Api, error_type

MARKER = {"$redacted": "1a2b3c4d5e6f"}
SHOWN = "\u2039redacted 1a2b3c4d5e6f\u203a"
LOOKALIKE = {"$redacted": "0123456789ab"}


@pytest.fixture
def api(provider: LocalProvider) -> Api:
    return Api(provider.url, provider.credential)


@pytest.fixture
def reviewer(provider: LocalProvider) -> Api:
    return Api(provider.url, provider.reviewer_credential)


def listed(reviewer: Api, request_id: str) -> dict[str, Any]:
    answer = reviewer.get("/v1/requests")
    assert 200 == answer.status_code, answer.text
    found: dict[str, Any] = next(r for r in answer.json()["requests"] if r["id"] == request_id)
    return found


def test_a_marker_the_create_does_not_list_is_shown_as_the_json_it_is(
    api: Api, reviewer: Api
) -> None:
    """A raw client's marker-shaped argument: the page shows the object, and no redaction notice."""
    created = api.new(arguments={**REFUND, "memo": LOOKALIKE})

    display = listed(reviewer, created["id"])["display"]

    assert "redacted" not in created
    assert "redacted" not in display
    assert '"memo": {\n    "$redacted": "0123456789ab"\n  }' in display["arguments"]
    assert "\u2039" not in display["arguments"]


def test_a_marker_the_create_lists_is_shown_as_a_redaction_and_echoed(
    api: Api, reviewer: Api
) -> None:
    """Listed places show as redactions (and are echoed); an unlisted marker beside them, not."""
    arguments = {
        "api_key": MARKER,
        "cards": [{"number": {"$redacted": "00ff00ff00ff"}}],
        "a/b~c": MARKER,
        "memo": LOOKALIKE,
    }
    redacted = ["/api_key", "/cards/0/number", "/a~1b~0c"]
    created = api.new(arguments=arguments, redacted=redacted)

    item = listed(reviewer, created["id"])
    display = item["display"]

    assert sorted(redacted) == created["redacted"] == item["redacted"]
    assert sorted(redacted) == api.poll(created["id"]).json()["redacted"]
    assert f'"api_key": {SHOWN},' in display["arguments"]
    assert f'"a/b~c": {SHOWN},' in display["arguments"]
    assert '"number": \u2039redacted 00ff00ff00ff\u203a' in display["arguments"]
    assert '"$redacted": "0123456789ab"' in display["arguments"]
    assert ["a/b~c", "api_key", "cards[0].number"] == display["redacted"]


@pytest.mark.parametrize(
    ("redacted", "words"),
    [
        ("/api_key", "list"),
        (["/memo"], "not a redaction marker"),
        (["/nothing"], "not a redaction marker"),
        (["api_key"], "not a redaction marker"),
        ([""], "not a redaction marker"),
        (["/cards/00/number"], "not a redaction marker"),
        (["/cards/1/number"], "not a redaction marker"),
        (["/api_key", "/api_key"], "twice"),
        ([1], "strings"),
        (["/x"] * 1001, "at most"),
    ],
    ids=[
        "not-a-list",
        "a-lookalike-with-a-bad-digest",
        "missing",
        "not-a-pointer",
        "the-whole-arguments",
        "leading-zero-index",
        "index-past-the-end",
        "twice",
        "not-a-string",
        "too-many",
    ],
)
def test_redacted_must_point_at_markers_in_the_arguments(
    api: Api, reviewer: Api, redacted: Any, words: str
) -> None:
    """Anything but distinct pointers at markers is 400 invalid_request, and nothing is created."""
    arguments = {
        "api_key": MARKER,
        "memo": {"$redacted": "NOT-HEX"},
        "cards": [{"number": MARKER}],
    }
    answer = api.create(arguments=arguments, redacted=redacted)

    assert (400, "invalid_request") == (answer.status_code, error_type(answer)), answer.text
    assert words in answer.json()["error"]["message"]
    assert [] == reviewer.get("/v1/requests").json()["requests"]


def test_redacted_is_part_of_the_idempotent_body(api: Api) -> None:
    """The same key with a different ``redacted`` is 422; with the same, a replay."""
    key = str(uuid.uuid4())
    arguments = {"a": MARKER, "b": MARKER}
    first = api.create(arguments=arguments, redacted=["/a"], key=key)
    again = api.create(arguments=arguments, redacted=["/a"], key=key)
    other = api.create(arguments=arguments, redacted=["/a", "/b"], key=key)
    none = api.create(arguments=arguments, key=key)

    assert (201, 200) == (first.status_code, again.status_code)
    assert first.json()["id"] == again.json()["id"]
    assert (422, 422) == (other.status_code, none.status_code)


def test_a_slack_webhook_shows_only_listed_markers_as_redactions() -> None:
    """The Slack-format webhook text: a listed marker as a redaction, an unlisted one as JSON."""
    now = datetime(2026, 9, 16, 12, 0, tzinfo=timezone.utc)
    event = {
        "type": "request.created",
        "data": {
            "id": "r1",
            "tool": "issue_refund",
            "status": "pending",
            "arguments": {"api_key": MARKER, "memo": LOOKALIKE},
            "redacted": ["/api_key"],
            "deadline_at": "2026-09-16T12:30:00Z",
        },
    }

    text = slack_payload(event, public_url=None, now=now)["blocks"][1]["text"]["text"]

    assert f"*api_key*: `{SHOWN}`" in text
    assert '*memo*: `{"$redacted":"0123456789ab"}`' in text
