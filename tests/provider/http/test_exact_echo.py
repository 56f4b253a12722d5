"""What a provider is sent comes back exactly: numbers as the very text sent (1e400, -0,
2.50), nesting to the limit, NUL and hidden characters, in create, replay, poll and list.
"""

from __future__ import annotations

import pytest

from approval_guard._codec.exact_json import MAX_JSON_DEPTH
from approval_guard.testing import LocalProvider
from tests.support.api import Api
from tests.support.raw_http import body_with, create_raw, listed, nested, send, strict_json

EXACT_NUMBERS = [
    "9007199254740993",
    "1" * 400,
    "1" * 5000,
    "1e400",
    "-1e400",
    "1e999999",
    "0.30000000000000004",
    "0.1000000000000000055511151231257827",
    "-0",
    "-0.0",
    "1E5",
    "1e-7",
    "2.50",
]


@pytest.mark.parametrize("number", EXACT_NUMBERS)
def test_numbers_are_kept_and_echoed_exactly_as_sent(provider: LocalProvider, number: str) -> None:
    """A number comes back in create, replay, poll and list as the very text that was sent."""
    body = body_with(f'{{"n":{number}}}')
    expected = f'"arguments":{{"n":{number}}}'

    status, created = create_raw(provider, body, key="exact")
    request_id = strict_json(created.decode())["id"]
    replay_status, replay = create_raw(provider, body, key="exact")
    poll_status, polled = send(
        provider, "GET", f"/v1/requests/{request_id}", token=provider.credential
    )
    page = listed(provider)

    assert (201, 200, 200) == (status, replay_status, poll_status)
    for raw in (created, replay, polled):
        assert expected in raw.decode()
    [entry] = page["requests"]
    assert f'{{\n  "n": {number}\n}}' == entry["display"]["arguments"]


def test_a_differently_written_number_is_a_different_body(provider: LocalProvider) -> None:
    """1e400 and 1E400 are not the same text: the second create with the key is a 422."""
    assert 201 == create_raw(provider, body_with('{"n":1e400}'), key="k")[0]
    status, raw = create_raw(provider, body_with('{"n":1E400}'), key="k")
    assert (422, "idempotency_key_reused") == (status, strict_json(raw.decode())["error"]["type"])


def test_nesting_up_to_the_limit_is_accepted(provider: LocalProvider) -> None:
    """Arguments nested exactly MAX_JSON_DEPTH levels deep are kept and echoed."""
    arguments = '{"a":' + nested(MAX_JSON_DEPTH - 1) + "}"
    status, raw = create_raw(provider, body_with(arguments))
    assert 201 == status
    assert arguments in raw.decode()


def test_a_nul_and_hidden_characters_round_trip_unchanged(api: Api) -> None:
    """Text the page escapes is still stored and echoed exactly (escaping is display only)."""
    arguments = {"memo\u200b": "a\x00b\u202ec\U000e0041", "n": [1, {"x": None}]}
    created = api.new(tool="t\x00\u2066", arguments=arguments)
    polled = api.poll(created["id"]).json()
    assert ("t\x00\u2066", arguments) == (polled["tool"], polled["arguments"])
