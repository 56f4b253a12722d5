"""API 1.1 at the local provider: editable arguments, a reviewer's edits, redacted values shown.

Over real HTTP: ``editable`` on create (and in the idempotency comparison),
``arguments`` on a decision (and every edit it must refuse), the history of an
edit, the review page's own decision endpoint that parses edit texts, and the
display form of a guard's redaction markers.
"""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from approval_guard._codec.exact_json import load_json
from approval_guard.provider.serving.lifecycle import ProviderServer
from approval_guard.provider.store.checks import MAX_EDITABLE
from approval_guard.testing import LocalProvider
from tests.support.api import REFUND, Api, create_from_text, error_type, signed_in

MARKER = {"$redacted": "1a2b3c4d5e6f"}
SHOWN_MARKER = "\u2039redacted 1a2b3c4d5e6f\u203a"


def editable_request(api: Api, editable: list[str], arguments: Any = None, **kw: Any) -> Any:
    """Create a request whose body carries ``editable``; return the response."""
    body = {
        "tool": "issue_refund",
        "arguments": REFUND if arguments is None else arguments,
        "timeout": "30m",
        "editable": editable,
    }
    return api.create(body=body, **kw)


def new_editable(api: Api, editable: list[str], arguments: Any = None) -> dict[str, Any]:
    response = editable_request(api, editable, arguments)
    assert 201 == response.status_code, response.text
    result: dict[str, Any] = response.json()
    return result


def decide_raw(reviewer: Api, request_id: str, body_text: str) -> requests.Response:
    """POST a decision body written by hand (so numbers stay as typed)."""
    return reviewer.post_raw(
        f"/v1/requests/{request_id}/decision",
        body_text.encode(),
        **{"Content-Type": "application/json"},
    )


def approve_with(reviewer: Api, request_id: str, arguments: Any) -> requests.Response:
    return reviewer.decide(request_id, {"status": "approved", "note": None, "arguments": arguments})


def listed(reviewer: Api, request_id: str) -> dict[str, Any]:
    response = reviewer.get("/v1/requests")
    assert 200 == response.status_code
    [entry] = [r for r in response.json()["requests"] if r["id"] == request_id]
    result: dict[str, Any] = entry
    return result


def page_decide(provider: LocalProvider, request_id: str, body: Any) -> requests.Response:
    """The review page's decision call: session cookie plus CSRF header."""
    session, csrf = signed_in(provider)
    return session.post(
        f"{provider.url}/review/requests/{request_id}/decision",
        json=body,
        headers={"X-CSRF-Token": csrf},
        timeout=10,
    )


# --------------------------------------------------------------------------- create


def test_create_echoes_the_editable_names_sorted(api: Api) -> None:
    """A create with "editable" stores it and echoes it (sorted: it is a set of names)."""
    created = new_editable(api, ["currency", "amount"])

    assert ["amount", "currency"] == created["editable"]
    assert ["amount", "currency"] == api.poll(created["id"]).json()["editable"]


@pytest.mark.parametrize("editable", [None, []])
def test_a_request_without_editable_names_echoes_no_editable(api: Api, editable: Any) -> None:
    """ "editable": null or [] is the same as leaving it out: the 1.0 request object."""
    created = new_editable(api, editable)

    assert "editable" not in created


@pytest.mark.parametrize(
    ("editable", "arguments"),
    [
        ("amount", REFUND),
        ({"amount": True}, REFUND),
        ([1], REFUND),
        ([None], REFUND),
        (["amount", "amount"], REFUND),
        (["tool"], REFUND),
        (["Amount"], REFUND),
        (["api_key"], {**REFUND, "api_key": MARKER}),
        (["card"], {**REFUND, "card": {"number": MARKER, "expiry": "12/30"}}),
        (["items"], {**REFUND, "items": [{"$redacted": "not-even-hex"}]}),
        ([f"a{i}" for i in range(MAX_EDITABLE + 1)], {f"a{i}": i for i in range(MAX_EDITABLE + 1)}),
    ],
    ids=[
        "not-a-list",
        "an-object",
        "a-number",
        "null-name",
        "duplicate",
        "not-an-argument",
        "case-differs",
        "redacted-value",
        "nested-redacted-value",
        "marker-like-value",
        "too-many",
    ],
)
def test_create_refuses_editable_names_it_cannot_honour(
    api: Api, provider: LocalProvider, editable: Any, arguments: dict[str, Any]
) -> None:
    """Editable names that are not unique top-level arguments, or name a redacted value: 400."""
    response = editable_request(api, editable, arguments)

    assert 400 == response.status_code, response.text
    assert "invalid_request" == error_type(response)
    assert [] == provider.requests()


def test_the_most_editable_names_are_accepted(api: Api) -> None:
    """Exactly MAX_EDITABLE names is fine: the limit is not off by one."""
    arguments = {f"a{i}": i for i in range(MAX_EDITABLE)}

    created = new_editable(api, list(arguments), arguments)

    assert sorted(arguments) == created["editable"]


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (["amount"], ["currency"], 422),
        (["amount"], [], 422),
        ([], ["amount"], 422),
        (["amount", "currency"], ["currency", "amount"], 200),
        ([], None, 200),
    ],
    ids=["other-names", "names-dropped", "names-added", "reordered", "empty-is-none"],
)
def test_editable_takes_part_in_the_idempotency_comparison(
    api: Api, provider: LocalProvider, first: Any, second: Any, expected: int
) -> None:
    """Same key, different editable names: 422 with the original; the same set again: a replay."""
    key = str(uuid.uuid4())
    original = editable_request(api, first, key=key)
    assert 201 == original.status_code

    again = editable_request(api, second, key=key)

    assert expected == again.status_code, again.text
    if expected == 422:
        assert "idempotency_key_reused" == error_type(again)
        assert original.json() == again.json()["request"]
    else:
        assert original.json() == again.json()
    assert 1 == len(provider.requests())


# --------------------------------------------------------------------------- decisions


def test_an_approval_with_edits_echoes_them_and_keeps_the_request_arguments(
    api: Api, reviewer: Api
) -> None:
    """decision.arguments holds the whole edited object; the request's arguments stay as created."""
    created = new_editable(api, ["amount", "currency"])
    edited = {**REFUND, "amount": 2500, "currency": "EUR"}

    answer = approve_with(reviewer, created["id"], edited)

    assert 200 == answer.status_code, answer.text
    for body in (answer.json(), api.poll(created["id"]).json()):
        assert "approved" == body["status"]
        assert REFUND == body["arguments"]
        assert edited == body["decision"]["arguments"]
        assert ["amount", "currency"] == body["editable"]


def test_arguments_equal_to_the_original_are_no_edit(api: Api, reviewer: Api) -> None:
    """An approval whose arguments are the request's own echoes no decision.arguments."""
    created = new_editable(api, ["amount"])

    answer = approve_with(reviewer, created["id"], dict(REFUND))

    assert 200 == answer.status_code, answer.text
    assert "arguments" not in answer.json()["decision"]


def test_a_plain_approval_of_an_editable_request_has_no_edit(api: Api, reviewer: Api) -> None:
    """Without "arguments" the decision is a 1.0 approval: no decision.arguments."""
    created = new_editable(api, ["amount"])

    answer = reviewer.decide(created["id"], {"status": "approved"})

    assert 200 == answer.status_code
    assert "arguments" not in answer.json()["decision"]


@pytest.mark.parametrize(
    "amount_text", ["9007199254740993", "1e308", "-0", "4900.0", "0.10000000000000000001"]
)
def test_edited_numbers_are_stored_and_echoed_exactly(
    api: Api, reviewer: Api, amount_text: str
) -> None:
    """An edited number comes back as the very text the reviewer sent, to the agent too."""
    created = new_editable(api, ["amount"])
    body = (
        '{"status": "approved", "arguments": {"payment_id": "payment_123", '
        f'"amount": {amount_text}, "currency": "GBP"}}}}'
    )

    answer = decide_raw(reviewer, created["id"], body)

    assert 200 == answer.status_code, answer.text
    polled = api.poll(created["id"]).text
    for text in (answer.text, polled):
        assert f'"amount":{amount_text},' in text.split('"decision"')[1]
        assert '"amount":4900,' in text.split('"decision"')[0]


@pytest.mark.parametrize(
    "amount_text",
    ["1e400", "-1e400", "1E309", "1e-400", "-2.5e-999", '[1, {"n": 1e400}]', "9" * 4301],
    ids=["1e400", "-1e400", "1E309", "1e-400", "tiny-negative", "nested", "4301-digits"],
)
@pytest.mark.parametrize("how", ["arguments", "page-edits"])
def test_an_edited_number_no_reader_can_hold_is_refused(
    api: Api, reviewer: Api, provider: LocalProvider, amount_text: str, how: str
) -> None:
    """A number past a double's range (or an integer too long to read) is 400, nothing decided."""
    created = new_editable(api, ["amount"])
    if how == "arguments":
        body = (
            '{"status": "approved", "arguments": {"payment_id": "payment_123", '
            f'"amount": {amount_text}, "currency": "GBP"}}}}'
        )
        answer = decide_raw(reviewer, created["id"], body)
    else:
        edit = {"status": "approved", "edits": {"amount": amount_text}}
        answer = page_decide(provider, created["id"], edit)

    assert (400, "invalid_request") == (answer.status_code, error_type(answer)), answer.text
    assert "amount" in answer.json()["error"]["message"]
    assert "pending" == api.poll(created["id"]).json()["status"]


def test_an_unchanged_out_of_range_number_does_not_stop_an_edit(
    provider: LocalProvider, reviewer: Api
) -> None:
    """The check is of what the reviewer changed: a create's own 1e400 may stay as it is."""
    body = (
        '{"tool": "issue_refund", "timeout": "30m", "editable": ["currency"], '
        '"arguments": {"payment_id": "payment_123", "amount": 1e400, "currency": "GBP"}}'
    )
    request_id = create_from_text(provider, body)

    answer = decide_raw(
        reviewer,
        request_id,
        '{"status": "approved", "arguments": {"payment_id": "payment_123", '
        '"amount": 1e400, "currency": "EUR"}}',
    )

    assert 200 == answer.status_code, answer.text


def test_a_type_change_of_an_editable_value_is_kept_for_the_guard_to_judge(
    api: Api, reviewer: Api
) -> None:
    """The provider keeps "2500" for 4900: converting (or refusing) it is the guard's job."""
    created = new_editable(api, ["amount"])

    answer = approve_with(reviewer, created["id"], {**REFUND, "amount": "2500"})

    assert 200 == answer.status_code, answer.text
    assert "2500" == answer.json()["decision"]["arguments"]["amount"]


HOSTILE_EDITS = {
    "non-editable-changed": {**REFUND, "payment_id": "payment_999"},
    "editable-and-non-editable": {**REFUND, "amount": 1, "payment_id": "payment_999"},
    # Python's == holds 4900 == 4900.0 and 1 == True; the store compares JSON text.
    "non-editable-int-to-float": {**REFUND, "currency": "GBP", "payment_id": "payment_123"}
    | {"amount": 4900.0},
    "key-added": {**REFUND, "to_account": "attacker"},
    "key-removed": {"payment_id": "payment_123", "amount": 4900},
    "editable-removed": {"payment_id": "payment_123", "currency": "GBP"},
    "marker-put-in": {**REFUND, "currency": MARKER},
    "nested-marker-put-in": {**REFUND, "currency": [{"$redacted": "1a2b3c4d5e6f"}]},
}


@pytest.mark.parametrize("arguments", HOSTILE_EDITS.values(), ids=HOSTILE_EDITS.keys())
def test_hostile_edits_are_refused_and_nothing_is_decided(
    api: Api, reviewer: Api, arguments: dict[str, Any]
) -> None:
    """An edit of a name not listed, an added or removed key, a marker smuggled in: 400, pending."""
    created = new_editable(api, ["currency"])

    answer = approve_with(reviewer, created["id"], arguments)

    assert 400 == answer.status_code, answer.text
    assert "invalid_request" == error_type(answer)
    assert "pending" == api.poll(created["id"]).json()["status"]


def test_a_bool_for_an_int_is_a_change_not_the_same_value(api: Api, reviewer: Api) -> None:
    """1 -> true on a non-editable argument is refused, though Python says True == 1."""
    created = new_editable(api, ["note"], {"count": 1, "note": "x"})

    answer = approve_with(reviewer, created["id"], {"count": True, "note": "x"})

    assert 400 == answer.status_code, answer.text
    assert "pending" == api.poll(created["id"]).json()["status"]


@pytest.mark.parametrize(
    "body",
    [
        {"status": "approved", "tool": "delete_everything"},
        {"status": "approved", "tool": "issue_refund", "arguments": REFUND},
        {"status": "denied", "note": "no", "arguments": {**REFUND, "amount": 1}},
        {"status": "denied", "note": "no", "arguments": REFUND},
        {"status": "approved", "arguments": [REFUND]},
        {"status": "approved", "arguments": "amount=1"},
        {"status": "approved", "arguments": None},
        {"status": "approved", "edits": {"amount": "1"}},
    ],
    ids=[
        "tool-changed",
        "tool-repeated",
        "edit-on-denial",
        "arguments-on-denial",
        "a-list",
        "a-string",
        "null",
        "page-field-on-the-api",
    ],
)
def test_decision_bodies_that_are_no_valid_edit_are_refused(
    api: Api, reviewer: Api, body: dict[str, Any]
) -> None:
    """A tool in a decision, arguments on a denial or not an object: 400, and still pending."""
    created = new_editable(api, ["amount"])

    answer = reviewer.decide(created["id"], body)

    assert 400 == answer.status_code, answer.text
    assert "invalid_request" == error_type(answer)
    assert "pending" == api.poll(created["id"]).json()["status"]


@pytest.mark.parametrize(
    "arguments", [REFUND, {**REFUND, "amount": 1}], ids=["unchanged", "changed"]
)
def test_arguments_on_a_request_without_editable_names_are_refused(
    api: Api, reviewer: Api, arguments: dict[str, Any]
) -> None:
    """A request that offered nothing editable takes no "arguments" at all: 400."""
    created = api.new()

    answer = approve_with(reviewer, created["id"], arguments)

    assert 400 == answer.status_code, answer.text
    assert "pending" == api.poll(created["id"]).json()["status"]


def test_an_edit_of_a_decided_request_is_not_pending(api: Api, reviewer: Api) -> None:
    """Edits on a request decided already: 409 not_pending, and the first decision stands."""
    created = new_editable(api, ["amount"])
    assert 200 == approve_with(reviewer, created["id"], {**REFUND, "amount": 1}).status_code

    answer = approve_with(reviewer, created["id"], {**REFUND, "amount": 2})

    assert 409 == answer.status_code
    assert 1 == answer.json()["request"]["decision"]["arguments"]["amount"]


# --------------------------------------------------------------------------- history


def test_the_history_records_each_edit_before_and_after(api: Api, reviewer: Api) -> None:
    """The created event lists the editable names; the decided event each changed value."""
    created = new_editable(api, ["amount", "currency"])
    body = (
        '{"status": "approved", "arguments": {"payment_id": "payment_123", '
        '"amount": 1e300, "currency": "GBP"}}'
    )
    assert 200 == decide_raw(reviewer, created["id"], body).status_code

    response = reviewer.get(f"/v1/requests/{created['id']}/history")

    assert 200 == response.status_code, response.text
    events = response.json()["events"]
    assert {"editable": ["amount", "currency"]} == events[0]["detail"]
    assert ["amount"] == list(events[1]["detail"]["edits"])
    assert '"edits":{"amount":{"after":1e300,"before":4900}}' in response.text


# --------------------------------------------------------------------------- the page's endpoint


def test_the_page_endpoint_builds_the_edit_from_exact_json_texts(
    api: Api, provider: LocalProvider
) -> None:
    """Edits sent as {name: json_text} are parsed on the server, 9007199254740993 exactly."""
    created = new_editable(api, ["amount", "currency"])
    edits = {"amount": "9007199254740993", "currency": ' "EUR" '}

    answer = page_decide(provider, created["id"], {"status": "approved", "edits": edits})

    assert 200 == answer.status_code, answer.text
    assert '"amount":9007199254740993,' in answer.text.split('"decision"')[1]
    stored = provider.get(created["id"]).decision
    assert stored is not None
    assert {**REFUND, "amount": 9007199254740993, "currency": "EUR"} == stored.arguments


def test_unchanged_edit_texts_from_the_page_are_no_edit(api: Api, provider: LocalProvider) -> None:
    """The page sends every input; texts equal to what they were filled with change nothing."""
    created = new_editable(api, ["amount"])
    [field] = listed(Api(provider.url, provider.reviewer_credential), created["id"])["display"][
        "editable"
    ]

    answer = page_decide(
        provider, created["id"], {"status": "approved", "edits": {"amount": field["text"]}}
    )

    assert 200 == answer.status_code, answer.text
    assert "arguments" not in answer.json()["decision"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"status": "approved", "edits": {"currency": "EUR"}}, "not JSON"),
        ({"status": "approved", "edits": {"amount": "1,"}}, "not JSON"),
        ({"status": "approved", "edits": {"payment_id": '"p_9"'}}, "not editable"),
        ({"status": "approved", "edits": {"new": "1"}}, "not editable"),
        ({"status": "approved", "edits": {"amount": 1}}, "JSON texts"),
        ({"status": "approved", "edits": ["amount", "1"]}, "JSON texts"),
        ({"status": "denied", "note": "no", "edits": {"amount": "1"}}, "denial"),
        ({"status": "approved", "edits": {"currency": '{"$redacted": "1a2b3c4d5e6f"}'}}, "marker"),
        ({"status": "approved", "edits": {"amount": '{"a": 1, "a": 2}'}}, "twice"),
    ],
    ids=[
        "text-without-quotes",
        "bad-json",
        "non-editable",
        "unknown-name",
        "not-a-text",
        "not-an-object",
        "denial",
        "marker",
        "duplicate-key",
    ],
)
def test_the_page_endpoint_refuses_bad_edits_with_a_clear_message(
    api: Api, provider: LocalProvider, body: dict[str, Any], message: str
) -> None:
    """Edit text that is not JSON, or a name not editable: 400 saying why; still pending."""
    created = new_editable(api, ["amount", "currency"])

    answer = page_decide(provider, created["id"], body)

    assert 400 == answer.status_code, answer.text
    assert message in answer.json()["error"]["message"]
    assert "pending" == api.poll(created["id"]).json()["status"]


def test_the_page_endpoint_needs_the_csrf_header(api: Api, provider: LocalProvider) -> None:
    """The session cookie alone (a cross-site form could send it) decides nothing: 403."""
    created = new_editable(api, ["amount"])
    session, _csrf = signed_in(provider)

    answer = session.post(
        f"{provider.url}/review/requests/{created['id']}/decision",
        json={"status": "approved", "edits": {"amount": "1"}},
        timeout=10,
    )

    assert 403 == answer.status_code
    assert "pending" == api.poll(created["id"]).json()["status"]


def test_the_page_endpoint_refuses_an_instance_credential(api: Api) -> None:
    """The agent's own credential cannot decide through the page's endpoint either: 403."""
    created = new_editable(api, ["amount"])

    answer = api.post_raw(
        f"/review/requests/{created['id']}/decision",
        json.dumps({"status": "approved"}).encode(),
        **{"Content-Type": "application/json"},
    )

    assert 403 == answer.status_code
    assert "pending" == api.poll(created["id"]).json()["status"]


# --------------------------------------------------------------------------- display


def test_redaction_markers_are_displayed_as_redacted(api: Api, reviewer: Api) -> None:
    """A marker, top-level or nested, shows as "redacted" and its digest; its path is listed."""
    arguments = {
        "api_key": MARKER,
        "card": {"number": {"$redacted": "00ff00ff00ff"}, "expiry": "12/30"},
        "lookalike": "\u2039redacted 1a2b3c4d5e6f\u203a",
    }
    created = api.new(arguments=arguments, redacted=["/api_key", "/card/number"])

    display = listed(reviewer, created["id"])["display"]

    assert f'"api_key": {SHOWN_MARKER},' in display["arguments"]
    assert '"number": \u2039redacted 00ff00ff00ff\u203a' in display["arguments"]
    # A string a model sends that reads like a marker keeps its quotes.
    assert f'"lookalike": "{SHOWN_MARKER}"' in display["arguments"]
    assert ["api_key", "card.number"] == display["redacted"]
    assert "$redacted" not in display["arguments"]


@pytest.mark.parametrize(
    "value",
    [
        {"$redacted": "1A2B3C4D5E6F"},
        {"$redacted": "1a2b3c4d5e6"},
        {"$redacted": 123456789012},
        {"$redacted": "1a2b3c4d5e6f", "x": 1},
    ],
    ids=["upper-case", "short", "a-number", "extra-key"],
)
def test_only_the_exact_marker_shape_is_displayed_as_redacted(
    api: Api, reviewer: Api, value: dict[str, Any]
) -> None:
    """Anything but {"$redacted": <12 lower-case hex>} is shown as the JSON it is."""
    created = api.new(arguments={"v": value})

    display = listed(reviewer, created["id"])["display"]

    assert "\u2039" not in display["arguments"]
    assert "redacted" not in display
    assert '"$redacted"' in display["arguments"]


@pytest.mark.parametrize(
    "value",
    [
        9007199254740993,
        "pay\u202eusd \U000e0041 \u2028 \x1b[2J",
        {"nested": [1.5, None, True, "\u200b"]},
    ],
    ids=["big-integer", "hidden-characters", "nested"],
)
def test_an_editable_inputs_text_is_exact_json_showing_hidden_characters(
    api: Api, reviewer: Api, value: Any
) -> None:
    """display.editable's text parses back to the very value, with hidden characters escaped."""
    created = new_editable(api, ["v"], {"v": value, "w": 1})

    [field] = listed(reviewer, created["id"])["display"]["editable"]

    assert "v" == field["name"]
    assert value == load_json(field["text"])
    assert field["text"].isascii() or all(c.isprintable() or c == "\n" for c in field["text"])


def test_the_display_shows_each_edit_before_and_after(api: Api, reviewer: Api) -> None:
    """Once approved with edits, display.changes lists each changed name, before and after."""
    created = new_editable(api, ["amount", "currency"])
    approve_with(reviewer, created["id"], {**REFUND, "amount": 2500})

    display = listed(reviewer, created["id"])["display"]

    assert [{"name": "amount", "before": "4900", "after": "2500"}] == display["changes"]


def test_a_plain_request_keeps_the_1_0_display_form(api: Api, reviewer: Api) -> None:
    """Without markers, editable names or edits, display has only the 1.0 keys."""
    created = api.new()

    display = listed(reviewer, created["id"])["display"]

    assert {"tool", "arguments", "note", "decided_by", "cancel_reason"} == set(display)


# --------------------------------------------------------------------------- an older database


def test_a_database_from_before_editable_arguments_gets_the_new_columns(tmp_path: Path) -> None:
    """A schema-1 file (no editable, decision_arguments columns) opens and takes edits."""
    path = tmp_path / "old.sqlite3"
    ProviderServer(path).close()
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE requests DROP COLUMN editable")
        db.execute("ALTER TABLE requests DROP COLUMN decision_arguments")
    with LocalProvider(str(path)) as provider:
        api = Api(provider.url, provider.credential)
        created = new_editable(api, ["amount"])

        answer = approve_with(
            Api(provider.url, provider.reviewer_credential),
            created["id"],
            {**REFUND, "amount": 1},
        )

        assert 200 == answer.status_code, answer.text
        assert 1 == answer.json()["decision"]["arguments"]["amount"]


def test_an_editable_name_with_hidden_characters_is_shown_escaped_and_edited_by_its_own_name(
    api: Api, provider: LocalProvider
) -> None:
    """display.editable escapes the name; the page sends the real name, which is what counts."""
    name = "amo\u200bunt"
    created = new_editable(api, [name], {name: 1, "amount": 2})
    [field] = listed(Api(provider.url, provider.reviewer_credential), created["id"])["display"][
        "editable"
    ]
    assert "amo\\u200bunt" == field["name"]

    answer = page_decide(provider, created["id"], {"status": "approved", "edits": {name: "5"}})

    assert 200 == answer.status_code, answer.text
    assert {name: 5, "amount": 2} == answer.json()["decision"]["arguments"]


def test_the_testing_helper_approves_with_the_reviewers_edits(
    api: Api, provider: LocalProvider
) -> None:
    """``LocalProvider.approve(arguments=...)`` records an edit exactly, as the page would."""
    created = new_editable(api, ["amount"])
    edited = {**REFUND, "amount": 9007199254740993}

    approved = provider.approve(created["id"], arguments=edited)

    assert "approved" == approved.status
    assert approved.decision is not None and edited == approved.decision.arguments
    assert REFUND == approved.arguments


def test_the_testing_helper_refuses_an_edit_of_a_name_not_editable(
    api: Api, provider: LocalProvider
) -> None:
    """An edit the provider would refuse over HTTP raises ValueError and decides nothing."""
    created = new_editable(api, ["amount"])

    with pytest.raises(ValueError):
        provider.approve(created["id"], arguments={**REFUND, "currency": "EUR"})

    assert "pending" == provider.get(created["id"]).status
