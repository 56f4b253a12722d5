"""The provider under hostile input: every bad body, query, header, request line or target is
a JSON 4xx, never a 500; nothing changes, and the provider still answers. Over real HTTP.
"""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest
import requests

from approval_guard._codec.exact_json import MAX_JSON_DEPTH
from approval_guard.provider import ProviderServer
from approval_guard.testing import LocalProvider
from tests.support.api import Api
from tests.support.raw_http import body_with, first_tokens, listed, nested, send, strict_json

ID = "{id}"  # replaced by a pending request's id
LONG = "x" * 10_000
INSTANCE, REVIEWER = "instance", "reviewer"
JSON = [("Content-Type", "application/json")]


def key(value: str) -> list[tuple[str, str]]:
    return [*JSON, ("Idempotency-Key", value)]


# (who, method, path, body, headers, expected status, expected error type)
BAD_INPUTS: dict[str, tuple[str, str, str, bytes, list[tuple[str, str]], int, str]] = {
    "arguments 30,000 deep": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with(nested(30_000)),
        key("k1"),
        400,
        "invalid_request",
    ),
    "arguments one level too deep": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with('{"a":' + nested(MAX_JSON_DEPTH) + "}"),
        key("k2"),
        400,
        "invalid_request",
    ),
    "NaN": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with('{"a":NaN}'),
        key("k3"),
        400,
        "invalid_request",
    ),
    "Infinity": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with('{"a":-Infinity}'),
        key("k4"),
        400,
        "invalid_request",
    ),
    "lone surrogate in a value": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with('{"a":"\\ud800"}'),
        key("k5"),
        400,
        "invalid_request",
    ),
    "lone surrogate in a key": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with('{"\\udfff":1}'),
        key("k6"),
        400,
        "invalid_request",
    ),
    "lone surrogate in the tool": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with("{}", tool='"t\\udc00"'),
        key("k7"),
        400,
        "invalid_request",
    ),
    "duplicate argument key": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with('{"amount":1,"amount":100000}'),
        key("k8"),
        400,
        "invalid_request",
    ),
    "duplicate body key": (
        INSTANCE,
        "POST",
        "/v1/requests",
        b'{"tool":"a","tool":"b","arguments":{},"timeout":"30m"}',
        key("k9"),
        400,
        "invalid_request",
    ),
    "array body": (INSTANCE, "POST", "/v1/requests", b"[]", key("k10"), 400, "invalid_request"),
    "string body": (INSTANCE, "POST", "/v1/requests", b'"x"', key("k11"), 400, "invalid_request"),
    "null body": (INSTANCE, "POST", "/v1/requests", b"null", key("k12"), 400, "invalid_request"),
    "invalid UTF-8": (
        INSTANCE,
        "POST",
        "/v1/requests",
        b'{"tool":"\xff\xfe","arguments":{}}',
        key("k13"),
        400,
        "invalid_request",
    ),
    "UTF-8 BOM": (
        INSTANCE,
        "POST",
        "/v1/requests",
        b"\xef\xbb\xbf" + body_with("{}"),
        key("k14"),
        400,
        "invalid_request",
    ),
    "Idempotency-Key of 256 characters": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with("{}"),
        key("k" * 256),
        400,
        "invalid_request",
    ),
    "Idempotency-Key twice": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with("{}"),
        [*key("a"), ("Idempotency-Key", "b")],
        400,
        "invalid_request",
    ),
    "Idempotency-Key missing": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with("{}"),
        JSON,
        400,
        "invalid_request",
    ),
    "Authorization twice": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with("{}"),
        [*key("k15"), ("Authorization", "Bearer nope")],
        400,
        "invalid_request",
    ),
    "Content-Length twice": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with("{}"),
        [*key("k16"), ("Content-Length", "2"), ("Content-Length", "47")],
        400,
        "invalid_request",
    ),
    "Content-Length with a sign": (
        INSTANCE,
        "POST",
        "/v1/requests",
        body_with("{}"),
        [*key("k17"), ("Content-Length", "+47")],
        400,
        "invalid_request",
    ),
    "Content-Length not a number": (
        INSTANCE,
        "POST",
        "/v1/requests",
        b"",
        [*key("k18"), ("Content-Length", "1_0")],
        400,
        "invalid_request",
    ),
    "wait empty": (INSTANCE, "GET", "/v1/requests/{id}?wait=", b"", [], 400, "invalid_request"),
    "wait negative": (
        INSTANCE,
        "GET",
        "/v1/requests/{id}?wait=-1s",
        b"",
        [],
        400,
        "invalid_request",
    ),
    "wait with 5,000 digits": (
        INSTANCE,
        "GET",
        "/v1/requests/{id}?wait=" + "9" * 5000 + "s",
        b"",
        [],
        400,
        "invalid_request",
    ),
    "wait in the wrong order": (
        INSTANCE,
        "GET",
        "/v1/requests/{id}?wait=1s1m",
        b"",
        [],
        400,
        "invalid_request",
    ),
    "a 10,000-character id": (INSTANCE, "GET", f"/v1/requests/{LONG}", b"", [], 404, "not_found"),
    "a 10,000-character id to cancel": (
        INSTANCE,
        "POST",
        f"/v1/requests/{LONG}/cancel",
        b"",
        [],
        404,
        "not_found",
    ),
    "cancel body an array": (
        INSTANCE,
        "POST",
        "/v1/requests/{id}/cancel",
        b"[]",
        JSON,
        400,
        "invalid_request",
    ),
    "cancel body null": (
        INSTANCE,
        "POST",
        "/v1/requests/{id}/cancel",
        b"null",
        JSON,
        400,
        "invalid_request",
    ),
    "cancel reason a lone surrogate": (
        INSTANCE,
        "POST",
        "/v1/requests/{id}/cancel",
        b'{"reason":"\\ud800"}',
        JSON,
        400,
        "invalid_request",
    ),
    "cancel reason twice": (
        INSTANCE,
        "POST",
        "/v1/requests/{id}/cancel",
        b'{"reason":"a","reason":"b"}',
        JSON,
        400,
        "invalid_request",
    ),
    "cancel reason a number": (
        INSTANCE,
        "POST",
        "/v1/requests/{id}/cancel",
        b'{"reason":1}',
        JSON,
        400,
        "invalid_request",
    ),
    "decision body an array": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b"[]",
        JSON,
        400,
        "invalid_request",
    ),
    "decision status twice": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b'{"status":"denied","status":"approved"}',
        JSON,
        400,
        "invalid_request",
    ),
    "decision status a list": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b'{"status":["approved"]}',
        JSON,
        400,
        "invalid_request",
    ),
    "decision note a lone surrogate": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b'{"status":"denied","note":"\\udbff"}',
        JSON,
        400,
        "invalid_request",
    ),
    "decision valid_for a number": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b'{"status":"approved","valid_for":300}',
        JSON,
        400,
        "invalid_request",
    ),
    "decision valid_for 25h": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b'{"status":"approved","valid_for":"25h"}',
        JSON,
        400,
        "invalid_request",
    ),
    "decision nested 30,000 deep": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b'{"status":"approved","x":' + nested(30_000).encode() + b"}",
        JSON,
        400,
        "invalid_request",
    ),
    "decision invalid UTF-8": (
        REVIEWER,
        "POST",
        "/v1/requests/{id}/decision",
        b'{"status":"denied","note":"\xc3"}',
        JSON,
        400,
        "invalid_request",
    ),
    "list limit 0": (REVIEWER, "GET", "/v1/requests?limit=0", b"", [], 400, "invalid_request"),
    "list limit 1001": (
        REVIEWER,
        "GET",
        "/v1/requests?limit=1001",
        b"",
        [],
        400,
        "invalid_request",
    ),
    "list limit with 5,000 digits": (
        REVIEWER,
        "GET",
        "/v1/requests?limit=" + "9" * 5000,
        b"",
        [],
        400,
        "invalid_request",
    ),
    "list status unknown": (
        REVIEWER,
        "GET",
        "/v1/requests?status=pending,bogus",
        b"",
        [],
        400,
        "invalid_request",
    ),
    "list before an unknown id": (
        REVIEWER,
        "GET",
        f"/v1/requests?before={LONG}",
        b"",
        [],
        400,
        "invalid_request",
    ),
    "events after not a number": (
        REVIEWER,
        "GET",
        "/v1/events?after=x",
        b"",
        [],
        400,
        "invalid_request",
    ),
    "events after with 5,000 digits": (
        REVIEWER,
        "GET",
        "/v1/events?after=" + "9" * 5000,
        b"",
        [],
        400,
        "invalid_request",
    ),
    "events wait malformed": (
        REVIEWER,
        "GET",
        "/v1/events?after=0&wait=soon",
        b"",
        [],
        400,
        "invalid_request",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_is_a_4xx_and_the_provider_still_answers(
    provider: LocalProvider, case: str
) -> None:
    """Each bad body, query or header gets its 4xx; the store is unchanged and still serves."""
    who, method, path, body, headers, expected_status, expected_type = BAD_INPUTS[case]
    pending = Api(provider.url, provider.credential).new()
    token = provider.credential if who == INSTANCE else provider.reviewer_credential
    before = listed(provider)

    status, raw = send(
        provider, method, path.replace(ID, pending["id"]), body, headers, token=token
    )

    assert (expected_status, expected_type) == (status, strict_json(raw.decode())["error"]["type"])
    assert before == listed(provider)  # nothing created, decided or cancelled
    poll = Api(provider.url, provider.credential).poll(pending["id"])
    assert (200, "pending") == (poll.status_code, poll.json()["status"])


def test_a_malformed_request_line_gets_a_json_400(provider: LocalProvider) -> None:
    """What http.server refuses by itself is answered in the API's error shape too."""
    parts = urlsplit(provider.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.connect()
        assert conn.sock is not None
        conn.sock.sendall(b"GET /v1/requests HTTP/1.1 extra\r\n\r\n")
        chunks = []
        while chunk := conn.sock.recv(65536):  # the provider closes after an error
            chunks.append(chunk)
        raw = b"".join(chunks).decode("latin-1")
    finally:
        conn.close()
    head, _, body = raw.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 400 ")
    assert "invalid_request" == strict_json(body)["error"]["type"]
    assert 200 == send(provider, "GET", "/v1/requests", token=provider.reviewer_credential)[0]


def raw_exchange(provider: LocalProvider, data: bytes) -> tuple[str, bytes]:
    """Send bytes as they are; return the status line and the body the provider answered."""
    parts = urlsplit(provider.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.connect()
        assert conn.sock is not None
        conn.sock.sendall(data)
        chunks = []
        while chunk := conn.sock.recv(65536):  # these exchanges end with Connection: close
            chunks.append(chunk)
    finally:
        conn.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n")[0], body


# Found in the adversarial review of the local provider, its CLI and what it shows.
@pytest.mark.parametrize(
    "target",
    ["http://[/v1/requests", "http://x]/v1/requests", "http://[::1/v1/events?after=1"],
)
def test_a_request_target_that_is_no_url_gets_a_json_400(
    provider: LocalProvider, target: str
) -> None:
    """A target urlsplit cannot parse is a 400 in the API's error shape, not a dropped line."""
    token = provider.reviewer_credential
    status, body = raw_exchange(
        provider,
        f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n".encode(),
    )

    assert status.startswith("HTTP/1.1 400 ")
    assert "invalid_request" == json.loads(body)["error"]["type"]
    listed = requests.get(
        f"{provider.url}/v1/requests", headers={"Authorization": f"Bearer {token}"}, timeout=5
    )
    assert 200 == listed.status_code


def test_an_encoded_slash_does_not_pick_another_endpoint(server: ProviderServer) -> None:
    """``POST /v1/requests/ID%2Fcancel`` is no cancel of ID: routing uses the path as sent."""
    instance, _ = first_tokens(server)
    api = Api(server.url, instance)
    request_id = api.new()["id"]
    answer = api.post_raw(f"/v1/requests/{request_id}%2Fcancel", b"")
    assert 405 == answer.status_code
    assert "pending" == api.poll(request_id).json()["status"]
    assert 404 == api.poll(f"{request_id}%2F").status_code
