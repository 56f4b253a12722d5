"""The provider under hostile input: every bad body, query and header is a 4xx, never a 500.

Also: numbers are kept and echoed exactly as sent, duplicate keys are refused,
the list pages without hiding anything, and a reused key's 422 carries the
request it first made. Everything here goes over real HTTP.
"""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import http.client
import json
import uuid
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import pytest

from approval_guard._codec.display import escape
from approval_guard._codec.exact_json import MAX_JSON_DEPTH, InvalidJSON, JSONNumber, load_json
from approval_guard.provider.store.opening import Store
from approval_guard.testing import LocalProvider
from tests.support.api import Api, error_type

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


def strict_json(text: str) -> Any:
    """Parse as a strict, lossless reader would: no NaN/Infinity, no duplicate keys."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} in the provider's answer")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        assert len({key for key, _ in items}) == len(items), items
        return dict(items)

    return json.loads(
        text,
        parse_constant=no_constant,
        object_pairs_hook=pairs,
        parse_int=Decimal,
        parse_float=Decimal,
    )


def send(
    provider: LocalProvider,
    method: str,
    path: str,
    body: bytes = b"",
    headers: list[tuple[str, str]] | None = None,
    *,
    token: str | None = None,
    content_length: bool = True,
) -> tuple[int, bytes]:
    """One raw HTTP exchange: headers may repeat, bodies may be any bytes."""
    parts = urlsplit(provider.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        if token is not None:
            conn.putheader("Authorization", f"Bearer {token}")
        for name, value in headers or []:
            conn.putheader(name, value)
        if content_length and not any(n.lower() == "content-length" for n, _ in headers or []):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def create_raw(provider: LocalProvider, body: bytes, key: str | None = None) -> tuple[int, bytes]:
    headers = [("Content-Type", "application/json"), ("Idempotency-Key", key or str(uuid.uuid4()))]
    return send(provider, "POST", "/v1/requests", body, headers, token=provider.credential)


def body_with(arguments: str, tool: str = '"t"') -> bytes:
    return f'{{"tool":{tool},"arguments":{arguments},"timeout":"30m"}}'.encode()


def listed(provider: LocalProvider, query: str = "") -> dict[str, Any]:
    status, raw = send(provider, "GET", f"/v1/requests{query}", token=provider.reviewer_credential)
    assert 200 == status, raw
    result: dict[str, Any] = strict_json(raw.decode())
    return result


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


ID = "{id}"  # replaced by a pending request's id
LONG = "x" * 10_000
INSTANCE, REVIEWER = "instance", "reviewer"
JSON = [("Content-Type", "application/json")]


def key(value: str) -> list[tuple[str, str]]:
    return [*JSON, ("Idempotency-Key", value)]


# (who, method, path, body, headers, expected status, expected error type)
BAD_INPUTS: dict[str, tuple[str, str, str, bytes, list[tuple[str, str]], int, str]] = {
    "arguments 30,000 deep": (INSTANCE, "POST", "/v1/requests", body_with(nested(30_000)),
                              key("k1"), 400, "invalid_request"),
    "arguments one level too deep": (INSTANCE, "POST", "/v1/requests",
                                     body_with("{\"a\":" + nested(MAX_JSON_DEPTH) + "}"),
                                     key("k2"), 400, "invalid_request"),
    "NaN": (INSTANCE, "POST", "/v1/requests", body_with('{"a":NaN}'), key("k3"), 400,
            "invalid_request"),
    "Infinity": (INSTANCE, "POST", "/v1/requests", body_with('{"a":-Infinity}'), key("k4"), 400,
                 "invalid_request"),
    "lone surrogate in a value": (INSTANCE, "POST", "/v1/requests", body_with('{"a":"\\ud800"}'),
                                  key("k5"), 400, "invalid_request"),
    "lone surrogate in a key": (INSTANCE, "POST", "/v1/requests", body_with('{"\\udfff":1}'),
                                key("k6"), 400, "invalid_request"),
    "lone surrogate in the tool": (INSTANCE, "POST", "/v1/requests",
                                   body_with("{}", tool='"t\\udc00"'), key("k7"), 400,
                                   "invalid_request"),
    "duplicate argument key": (INSTANCE, "POST", "/v1/requests",
                               body_with('{"amount":1,"amount":100000}'), key("k8"), 400,
                               "invalid_request"),
    "duplicate body key": (INSTANCE, "POST", "/v1/requests",
                           b'{"tool":"a","tool":"b","arguments":{},"timeout":"30m"}', key("k9"),
                           400, "invalid_request"),
    "array body": (INSTANCE, "POST", "/v1/requests", b"[]", key("k10"), 400, "invalid_request"),
    "string body": (INSTANCE, "POST", "/v1/requests", b'"x"', key("k11"), 400, "invalid_request"),
    "null body": (INSTANCE, "POST", "/v1/requests", b"null", key("k12"), 400, "invalid_request"),
    "invalid UTF-8": (INSTANCE, "POST", "/v1/requests", b'{"tool":"\xff\xfe","arguments":{}}',
                      key("k13"), 400, "invalid_request"),
    "UTF-8 BOM": (INSTANCE, "POST", "/v1/requests", b"\xef\xbb\xbf" + body_with("{}"),
                  key("k14"), 400, "invalid_request"),
    "Idempotency-Key of 256 characters": (INSTANCE, "POST", "/v1/requests", body_with("{}"),
                                          key("k" * 256), 400, "invalid_request"),
    "Idempotency-Key twice": (INSTANCE, "POST", "/v1/requests", body_with("{}"),
                              [*key("a"), ("Idempotency-Key", "b")], 400, "invalid_request"),
    "Idempotency-Key missing": (INSTANCE, "POST", "/v1/requests", body_with("{}"), JSON, 400,
                                "invalid_request"),
    "Authorization twice": (INSTANCE, "POST", "/v1/requests", body_with("{}"),
                            [*key("k15"), ("Authorization", "Bearer nope")], 400,
                            "invalid_request"),
    "Content-Length twice": (INSTANCE, "POST", "/v1/requests", body_with("{}"),
                             [*key("k16"), ("Content-Length", "2"), ("Content-Length", "47")],
                             400, "invalid_request"),
    "Content-Length with a sign": (INSTANCE, "POST", "/v1/requests", body_with("{}"),
                                   [*key("k17"), ("Content-Length", "+47")], 400,
                                   "invalid_request"),
    "Content-Length not a number": (INSTANCE, "POST", "/v1/requests", b"",
                                    [*key("k18"), ("Content-Length", "1_0")], 400,
                                    "invalid_request"),
    "wait empty": (INSTANCE, "GET", "/v1/requests/{id}?wait=", b"", [], 400, "invalid_request"),
    "wait negative": (INSTANCE, "GET", "/v1/requests/{id}?wait=-1s", b"", [], 400,
                      "invalid_request"),
    "wait with 5,000 digits": (INSTANCE, "GET", "/v1/requests/{id}?wait=" + "9" * 5000 + "s", b"",
                               [], 400, "invalid_request"),
    "wait in the wrong order": (INSTANCE, "GET", "/v1/requests/{id}?wait=1s1m", b"", [], 400,
                                "invalid_request"),
    "a 10,000-character id": (INSTANCE, "GET", f"/v1/requests/{LONG}", b"", [], 404, "not_found"),
    "a 10,000-character id to cancel": (INSTANCE, "POST", f"/v1/requests/{LONG}/cancel", b"", [],
                                        404, "not_found"),
    "cancel body an array": (INSTANCE, "POST", "/v1/requests/{id}/cancel", b"[]", JSON, 400,
                             "invalid_request"),
    "cancel body null": (INSTANCE, "POST", "/v1/requests/{id}/cancel", b"null", JSON, 400,
                         "invalid_request"),
    "cancel reason a lone surrogate": (INSTANCE, "POST", "/v1/requests/{id}/cancel",
                                       b'{"reason":"\\ud800"}', JSON, 400, "invalid_request"),
    "cancel reason twice": (INSTANCE, "POST", "/v1/requests/{id}/cancel",
                            b'{"reason":"a","reason":"b"}', JSON, 400, "invalid_request"),
    "cancel reason a number": (INSTANCE, "POST", "/v1/requests/{id}/cancel", b'{"reason":1}',
                               JSON, 400, "invalid_request"),
    "decision body an array": (REVIEWER, "POST", "/v1/requests/{id}/decision", b"[]", JSON, 400,
                               "invalid_request"),
    "decision status twice": (REVIEWER, "POST", "/v1/requests/{id}/decision",
                              b'{"status":"denied","status":"approved"}', JSON, 400,
                              "invalid_request"),
    "decision status a list": (REVIEWER, "POST", "/v1/requests/{id}/decision",
                               b'{"status":["approved"]}', JSON, 400, "invalid_request"),
    "decision note a lone surrogate": (REVIEWER, "POST", "/v1/requests/{id}/decision",
                                       b'{"status":"denied","note":"\\udbff"}', JSON, 400,
                                       "invalid_request"),
    "decision valid_for a number": (REVIEWER, "POST", "/v1/requests/{id}/decision",
                                    b'{"status":"approved","valid_for":300}', JSON, 400,
                                    "invalid_request"),
    "decision valid_for 25h": (REVIEWER, "POST", "/v1/requests/{id}/decision",
                               b'{"status":"approved","valid_for":"25h"}', JSON, 400,
                               "invalid_request"),
    "decision nested 30,000 deep": (REVIEWER, "POST", "/v1/requests/{id}/decision",
                                    b'{"status":"approved","x":' + nested(30_000).encode() + b"}",
                                    JSON, 400, "invalid_request"),
    "decision invalid UTF-8": (REVIEWER, "POST", "/v1/requests/{id}/decision",
                               b'{"status":"denied","note":"\xc3"}', JSON, 400,
                               "invalid_request"),
    "list limit 0": (REVIEWER, "GET", "/v1/requests?limit=0", b"", [], 400, "invalid_request"),
    "list limit 1001": (REVIEWER, "GET", "/v1/requests?limit=1001", b"", [], 400,
                        "invalid_request"),
    "list limit with 5,000 digits": (REVIEWER, "GET", "/v1/requests?limit=" + "9" * 5000, b"", [],
                                     400, "invalid_request"),
    "list status unknown": (REVIEWER, "GET", "/v1/requests?status=pending,bogus", b"", [], 400,
                            "invalid_request"),
    "list before an unknown id": (REVIEWER, "GET", f"/v1/requests?before={LONG}", b"", [], 400,
                                  "invalid_request"),
    "events after not a number": (REVIEWER, "GET", "/v1/events?after=x", b"", [], 400,
                                  "invalid_request"),
    "events after with 5,000 digits": (REVIEWER, "GET", "/v1/events?after=" + "9" * 5000, b"", [],
                                       400, "invalid_request"),
    "events wait malformed": (REVIEWER, "GET", "/v1/events?after=0&wait=soon", b"", [], 400,
                              "invalid_request"),
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

    status, raw = send(provider, method, path.replace(ID, pending["id"]), body, headers,
                       token=token)

    assert (expected_status, expected_type) == (status, strict_json(raw.decode())["error"]["type"])
    assert before == listed(provider)  # nothing created, decided or cancelled
    poll = Api(provider.url, provider.credential).poll(pending["id"])
    assert (200, "pending") == (poll.status_code, poll.json()["status"])


@pytest.mark.parametrize("number", EXACT_NUMBERS)
def test_numbers_are_kept_and_echoed_exactly_as_sent(provider: LocalProvider, number: str) -> None:
    """A number comes back in create, replay, poll and list as the very text that was sent."""
    body = body_with(f'{{"n":{number}}}')
    expected = f'"arguments":{{"n":{number}}}'

    status, created = create_raw(provider, body, key="exact")
    request_id = strict_json(created.decode())["id"]
    replay_status, replay = create_raw(provider, body, key="exact")
    poll_status, polled = send(provider, "GET", f"/v1/requests/{request_id}",
                               token=provider.credential)
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


def test_reused_key_answer_carries_the_first_request(provider: LocalProvider, api: Api) -> None:
    """422 idempotency_key_reused carries the request first made with the key, as it is now."""
    first = api.new(key="shared", timeout="30m")
    provider.approve(first["id"], note="ok")

    response = api.create(key="shared", timeout="29m")

    assert (422, "idempotency_key_reused") == (response.status_code, error_type(response))
    original = response.json()["request"]
    assert (first["id"], "approved", "30m") == (
        original["id"], original["status"], original["timeout"]
    )
    assert first["arguments"] == original["arguments"]


def test_another_credential_never_sees_a_request_through_a_key(provider: LocalProvider) -> None:
    """Keys belong to one credential: another one with the same key gets its own request."""
    first = Api(provider.url, provider.credential).new(key="shared")
    other = Api(provider.url, provider.store.create_credential("instance", "other"))

    response = other.create(key="shared", timeout="29m")

    assert 201 == response.status_code
    assert first["id"] != response.json()["id"]


def test_the_list_pages_through_every_request(provider: LocalProvider, api: Api) -> None:
    """limit and before walk the whole list, newest first, with next_before null at the end."""
    ids = [api.new()["id"] for _ in range(5)][::-1]
    seen: list[str] = []
    query = "?limit=2"
    while True:
        page = listed(provider, query)
        seen += [r["id"] for r in page["requests"]]
        if page["next_before"] is None:
            break
        assert page["requests"][-1]["id"] == page["next_before"]
        query = f"?limit=2&before={page['next_before']}"
    assert ids == seen


def test_the_list_filters_by_several_statuses(provider: LocalProvider, api: Api) -> None:
    """status=approved,cancelled lists exactly the requests with one of those statuses."""
    approved, cancelled, pending = (api.new()["id"] for _ in range(3))
    provider.approve(approved)
    assert 200 == api.cancel(cancelled).status_code

    page = listed(provider, "?status=approved,cancelled")

    assert [cancelled, approved] == [r["id"] for r in page["requests"]]
    assert pending not in {r["id"] for r in listed(provider, "?status=approved")["requests"]}


def test_the_list_display_escapes_hidden_characters(provider: LocalProvider, api: Api) -> None:
    """The list's display form shows bidi and invisible characters escaped, values intact."""
    created = api.new(tool="pay\u202eusd", arguments={"to\u200b": "a\u2066b\x1b[2J"})
    provider.deny(created["id"], "no\u061c")

    [entry] = listed(provider)["requests"]

    assert {
        "tool": "pay\\u202eusd",
        "arguments": '{\n  "to\\u200b": "a\\u2066b\\u001b[2J"\n}',
        "note": "no\\u061c",
        "decided_by": "testing reviewer",
        "cancel_reason": None,
    } == entry["display"]
    assert {"to\u200b": "a\u2066b\x1b[2J"} == entry["arguments"]


@pytest.mark.parametrize(
    "value",
    [float("inf"), float("nan"), "\ud800", {"\udc00": 1}, {1: "x"}, object(),
     json.loads(nested(MAX_JSON_DEPTH))],
    ids=["inf", "nan", "surrogate", "surrogate key", "int key", "object", "too deep"],
)
def test_the_store_refuses_what_json_cannot_keep(value: Any) -> None:
    """Store.create_request refuses a value it could not store exactly, and writes nothing."""
    store = Store(":memory:")
    try:
        store.ensure_initial_credentials()
        owner = next(c for c in store.list_credentials() if c.kind == "instance")
        with pytest.raises(InvalidJSON):
            store.create_request(owner=owner, idempotency_key="k", tool="t",
                                 arguments={"v": value}, timeout_seconds=60)
        assert [] == store.list_requests()
    finally:
        store.close()


def test_exact_numbers_parse_to_plain_python_numbers_when_they_can() -> None:
    """Only numbers Python would rewrite are kept as text; the rest are int and float."""
    assert {"a": 1, "b": 0.5, "c": JSONNumber("1e400"), "d": JSONNumber("-0")} == load_json(
        '{"a":1,"b":0.5,"c":1e400,"d":-0}'
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain ascii", "plain ascii"),
        ("tab\there", "tab\\u0009here"),
        ("esc\x1b[2J", "esc\\u001b[2J"),
        ("del\x7f", "del\\u007f"),
        ("bidi\u202a\u202b\u202c\u202d\u202e", "bidi\\u202a\\u202b\\u202c\\u202d\\u202e"),
        ("iso\u2066\u2067\u2068\u2069", "iso\\u2066\\u2067\\u2068\\u2069"),
        ("mark\u200e\u200f\u061c", "mark\\u200e\\u200f\\u061c"),
        ("zw\u200b\u200c\u200d\u2060\ufeff", "zw\\u200b\\u200c\\u200d\\u2060\\ufeff"),
        ("lines\u2028\u2029", "lines\\u2028\\u2029"),
        ("nbsp\u00a0", "nbsp\\u00a0"),
        ("filler\u3164\u115f", "filler\\u3164\\u115f"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("café 💶 €", "café 💶 €"),
    ],
)
def test_display_escapes_every_hidden_character(text: str, shown: str) -> None:
    """escape() writes controls, bidi marks and invisible characters as \\u escapes, only those."""
    assert shown == escape(text)


def test_a_non_finite_number_stored_by_an_older_version_is_still_served(
    provider: LocalProvider, api: Api
) -> None:
    """An Infinity an older provider stored reads back as a string: valid JSON, no 500."""
    created = api.new(arguments={"n": 1})
    with provider.store.transaction() as db:
        db.execute("UPDATE requests SET arguments = ? WHERE id = ?",
                   ('{"n":Infinity}', created["id"]))

    polled = api.poll(created["id"])

    assert (200, {"n": "Infinity"}) == (polled.status_code, polled.json()["arguments"])
    assert [created["id"]] == [r["id"] for r in listed(provider)["requests"]]


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
