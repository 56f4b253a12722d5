"""Standing grants over real HTTP, on SQLite and PostgreSQL: given, used, scoped, ended."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from approval_guard.provider import ProviderServer
from approval_guard.provider.rules.config import parse_rules
from tests.support.api import REFUND, Api, error_type
from tests.support.grants import Desk, open_desk, store_kind  # noqa: F401 (fixture)

RULES = """\
[tools.issue_refund]
max_grant = "2h"

[tools.delete_user]
grants = false

[tools.wire_money]
approvals_required = 2
self_approval = false
"""
ONE_HOUR = {"for": "1h", "match": {"amount": {"min": 1, "max": 5000}}}


@pytest.fixture
def desk(store_kind: tuple[str, str | None], tmp_path: Path) -> Iterator[Desk]:  # noqa: F811
    kind, dsn = store_kind
    opened = open_desk(kind, dsn, RULES, tmp_path=tmp_path)
    try:
        yield opened
    finally:
        opened.server.close()
        opened.store.close()


def raw_create(agent: Api, text: str) -> requests.Response:
    """A create from its body as JSON text (numbers such as 1e3 as written)."""
    return agent.session.post(
        f"{agent.url}/v1/requests",
        data=text.encode(),
        headers=agent.headers(
            **{"Idempotency-Key": str(uuid.uuid4()), "Content-Type": "application/json"}
        ),
        timeout=10,
    )


def granted(desk: Desk, grant: dict[str, Any] = ONE_HOUR, **create: Any) -> dict[str, Any]:
    """A request approved by alice with ``grant``; the decision's answer."""
    first = desk.agent.new(**create)
    answer = desk.grant(first["id"], "alice", grant)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_an_approval_with_a_grant_answers_the_request_and_the_grant(desk: Desk) -> None:
    """The answer is the request as today plus the grant object under "grant"."""
    body = granted(desk)
    assert body["status"] == "approved"
    grant = body["grant"]
    assert set(grant) == {
        "id",
        "tool",
        "decision",
        "status",
        "match",
        "requested_by",
        "agent",
        "granted_by",
        "granted_at",
        "expires_at",
        "uses",
        "uses_left",
        "from_request",
    }
    assert grant["status"] == "live" and grant["decision"] == "approved"
    assert grant["granted_by"] == ["alice"] and grant["agent"] == "instance"
    assert grant["from_request"] == body["id"] and grant["tool"] == "issue_refund"
    assert grant["match"] == {
        "amount": {"min": 1, "max": 5000},
        "currency": "same",
        "payment_id": "same",
    }
    assert grant["requested_by"] == "same"


def test_a_covered_create_is_answered_approved_at_once_naming_the_grant(desk: Desk) -> None:
    """201, approved, decided_by the granter, decision.grant; no poll needed."""
    grant = granted(desk)["grant"]
    answer = desk.agent.create(arguments={**REFUND, "amount": 1200})
    assert answer.status_code == 201
    body = answer.json()
    assert body["status"] == "approved"
    decision = body["decision"]
    assert decision["decided_by"] == "alice"
    assert decision["expires_at"] is not None
    assert decision["grant"]["id"] == grant["id"]
    assert decision["grant"]["granted_by"] == ["alice"]
    assert decision["grant"]["uses_left"] is None
    assert set(decision["grant"]) == {"id", "granted_by", "granted_at", "expires_at", "uses_left"}
    audit = desk.store.audit(request_id=body["id"])
    assert [row.action for row in audit][-2:] == ["request.approval", "grant.used"]


@pytest.mark.parametrize(
    "amount_text",
    ["1000.0", "1e3", "500.5", "true", "5001", "0", '"1000"', "null"],
)
def test_an_integer_range_covers_only_json_integers_inside_it(desk: Desk, amount_text: str) -> None:
    """1000.0, 1e3, 500.5 and true are outside an integer range; so are its outside values."""
    granted(desk)
    text = (
        '{"tool": "issue_refund", "timeout": "30m", "arguments": '
        f'{{"payment_id": "payment_123", "amount": {amount_text}, "currency": "GBP"}}}}'
    )
    answer = raw_create(desk.agent, text)
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"] == "pending"


@pytest.mark.parametrize("amount", ["1", "5000", "2500"])
def test_an_integer_range_covers_its_edges(desk: Desk, amount: str) -> None:
    """Inclusive at both ends."""
    granted(desk)
    text = (
        '{"tool": "issue_refund", "timeout": "30m", "arguments": '
        f'{{"payment_id": "payment_123", "amount": {amount}, "currency": "GBP"}}}}'
    )
    assert raw_create(desk.agent, text).json()["status"] == "approved"


def test_a_fraction_bound_covers_any_number_exactly_as_decimals(desk: Desk) -> None:
    """max = 10.10 covers 10.1 and 1e1, not 10.100000000000000001 (no float rounding)."""
    granted(desk, {"for": "1h", "match": {"amount": {"max": 10.10}}})
    for text, expected in (
        ("10.1", "approved"),
        ("1e1", "approved"),
        ("10.100000000000000001", "pending"),
        ("true", "pending"),
    ):
        body = (
            '{"tool": "issue_refund", "timeout": "30m", "arguments": '
            f'{{"payment_id": "payment_123", "amount": {text}, "currency": "GBP"}}}}'
        )
        assert raw_create(desk.agent, body).json()["status"] == expected, text


def test_same_arguments_added_and_missing_names_are_not_covered(desk: Desk) -> None:
    """Unnamed arguments must be the same; a new or a missing argument is never covered."""
    granted(desk)
    for arguments in (
        {**REFUND, "currency": "EUR"},
        {**REFUND, "payment_id": "payment_124"},
        {**REFUND, "note": "x"},
        {"payment_id": "payment_123", "amount": 4900},
    ):
        assert desk.agent.new(arguments=arguments)["status"] == "pending", arguments
    assert desk.agent.new()["status"] == "approved"


def test_a_prefix_is_plain_characters_only(desk: Desk) -> None:
    """No case folding, normalisation, glob: a confusable or shorter look-alike is not covered."""
    granted(desk, {"for": "1h", "match": {"payment_id": {"prefix": "payment_12"}}})
    for payment_id, expected in (
        ("payment_12", "approved"),
        ("payment_129999", "approved"),
        ("Payment_123", "pending"),
        ("payment_1", "pending"),
        ("p\u0430yment_123", "pending"),  # a Cyrillic a
        ("payment_1*", "pending"),
    ):
        status = desk.agent.new(arguments={**REFUND, "payment_id": payment_id})["status"]
        assert status == expected, payment_id


def test_in_compares_json_types(desk: Desk) -> None:
    """ "in": [1, "GBP"] covers 1 and "GBP", not true, "1" or 1.0."""
    granted(desk, {"for": "1h", "match": {"currency": {"in": ["GBP", "EUR", 1]}}})
    for currency, expected in (("EUR", "approved"), ("gbp", "pending"), (True, "pending")):
        status = desk.agent.new(arguments={**REFUND, "currency": currency})["status"]
        assert status == expected, currency
    body = (
        '{"tool": "issue_refund", "timeout": "30m", "arguments": '
        '{"payment_id": "payment_123", "amount": 4900, "currency": 1.0}}'
    )
    assert raw_create(desk.agent, body).json()["status"] == "pending"


def test_uses_are_counted_and_then_the_grant_is_used_up(desk: Desk) -> None:
    """uses = 2: two covered creates, then a person is asked again."""
    grant = granted(desk, {**ONE_HOUR, "uses": 2})["grant"]
    statuses = [desk.agent.new()["status"] for _ in range(3)]
    assert statuses == ["approved", "approved", "pending"]
    shown = desk.as_("bob").get(f"/v1/grants/{grant['id']}").json()
    assert shown["status"] == "used_up" and shown["uses_left"] == 0


def test_a_grant_expires_on_the_providers_clock(desk: Desk) -> None:
    """At its expires_at it covers nothing and lists as expired."""
    grant = granted(desk)["grant"]
    desk.clock.advance(3599)
    assert desk.agent.new()["status"] == "approved"
    desk.clock.advance(1)
    assert desk.agent.new()["status"] == "pending"
    listed = desk.as_("bob").get("/v1/grants").json()["grants"]
    assert listed == []
    every = desk.as_("bob").get("/v1/grants?all=1").json()["grants"]
    assert [(one["id"], one["status"]) for one in every] == [(grant["id"], "expired")]


def test_revoking_stops_the_next_create_and_lists_it_ended(desk: Desk) -> None:
    """POST /v1/grants/{id}/revoke: the next create asks a person; all=1 shows it revoked."""
    grant = granted(desk)["grant"]
    assert [one["id"] for one in desk.as_("bob").get("/v1/grants").json()["grants"]] == [
        grant["id"]
    ]
    answer = desk.as_("bob").session.post(
        f"{desk.server.url}/v1/grants/{grant['id']}/revoke",
        json={"note": "enough"},
        headers=desk.as_("bob").headers(),
        timeout=10,
    )
    assert answer.status_code == 200 and answer.json()["status"] == "revoked"
    assert desk.agent.new()["status"] == "pending"
    assert desk.as_("bob").get("/v1/grants").json()["grants"] == []
    every = desk.as_("bob").get("/v1/grants?all=1").json()["grants"]
    assert every[0]["status"] == "revoked"
    assert [row.action for row in desk.store.audit() if row.action.startswith("grant.")] == [
        "grant.given",
        "grant.revoked",
    ]


def test_an_agent_credential_may_not_list_give_or_revoke_grants(desk: Desk) -> None:
    """403 for the instance credential on every grants endpoint, and nothing changes."""
    grant = granted(desk)["grant"]
    agent = desk.agent
    assert agent.get("/v1/grants").status_code == 403
    assert agent.get(f"/v1/grants/{grant['id']}").status_code == 403
    for verb in ("revoke", "approve"):
        answer = agent.session.post(
            f"{agent.url}/v1/grants/{grant['id']}/{verb}", json={}, headers=agent.headers()
        )
        assert answer.status_code == 403, verb
    second = agent.new(arguments={**REFUND, "payment_id": "other"})
    answer = agent.decide(second["id"], {"status": "approved", "grant": ONE_HOUR})
    assert answer.status_code == 403
    assert desk.store.get_grant(grant["id"]).status == "live"


def test_a_grant_covers_only_the_agent_that_made_the_request(desk: Desk) -> None:
    """Another agent credential's identical call is asked of a person."""
    granted(desk)
    other = Api(desk.server.url, desk.store.add_agent("billing-bot"))
    assert other.new()["status"] == "pending"
    assert desk.agent.new()["status"] == "approved"


def test_requested_by_same_and_any(desk: Desk) -> None:
    """ "same" covers only calls for the same person; "any" anyone's."""
    granted(
        desk,
        body={
            "tool": "issue_refund",
            "arguments": REFUND,
            "timeout": "30m",
            "requested_by": "dave",
        },
    )
    for who, expected in (("dave", "approved"), ("erin", "pending")):
        body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m", "requested_by": who}
        assert desk.agent.new(body=body)["status"] == expected
    assert desk.agent.new()["status"] == "pending"  # nobody's: not the same as dave
    granted(
        desk,
        {**ONE_HOUR, "requested_by": "any"},
        arguments={**REFUND, "payment_id": "p2"},
    )
    body = {
        "tool": "issue_refund",
        "arguments": {**REFUND, "payment_id": "p2"},
        "timeout": "30m",
        "requested_by": "erin",
    }
    assert desk.agent.new(body=body)["status"] == "approved"


def test_a_standing_denial_wins_over_a_grant(desk: Desk) -> None:
    """A denial with a grant denies covered calls at once, even where a grant approves them."""
    granted(desk)
    first = desk.agent.new(arguments={**REFUND, "amount": 6000})
    answer = desk.as_("bob").decide(
        first["id"],
        {
            "status": "denied",
            "note": "no more refunds today",
            "grant": {"for": "1h", "match": {"amount": {"min": 3000}}},
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["grant"]["decision"] == "denied"
    denied = desk.agent.new(arguments={**REFUND, "amount": 3500})
    assert denied["status"] == "denied"
    assert denied["decision"]["note"] == "no more refunds today"
    assert denied["decision"]["decided_by"] == "bob"
    assert desk.agent.new(arguments={**REFUND, "amount": 2000})["status"] == "approved"


def test_grants_false_refuses_a_grant_and_records_nothing(desk: Desk) -> None:
    """400, and the request is still pending."""
    first = desk.agent.new(tool="delete_user", arguments={"user": "u1"})
    answer = desk.grant(first["id"], "alice", {"for": "1h"})
    assert answer.status_code == 400 and error_type(answer) == "invalid_request"
    assert desk.agent.poll(first["id"]).json()["status"] == "pending"


@pytest.mark.parametrize(
    "grant",
    [
        {"for": "3h"},
        {},
        {"for": "1h", "uses": 0},
        {"for": "1h", "uses": True},
        {"for": "1h", "match": {"nope": "any"}},
        {"for": "1h", "match": {"amount": {"min": 9, "max": 1}}},
        {"for": "1h", "match": {"amount": {"in": []}}},
        {"for": "1h", "match": {"amount": {"regex": ".*"}}},
        {"for": "1h", "match": {"amount": {"min": True}}},
        {"for": "1h", "requested_by": "everyone"},
        {"for": "1h", "extra": 1},
    ],
)
def test_a_bad_grant_is_400_and_decides_nothing(desk: Desk, grant: dict[str, Any]) -> None:
    """Beyond max_grant, bad uses, an unknown argument, a bad constraint: nothing recorded."""
    first = desk.agent.new()
    answer = desk.grant(first["id"], "alice", grant)
    assert answer.status_code == 400, answer.text
    assert desk.agent.poll(first["id"]).json()["status"] == "pending"
    assert desk.as_("bob").get("/v1/grants?all=1").json()["grants"] == []


def test_a_redacted_argument_can_only_be_same_or_any(desk: Desk) -> None:
    """A range on a redacted value is refused; "same" compares its digest."""
    arguments = {**REFUND, "card": {"$redacted": "0123456789ab"}}
    first = desk.agent.new(arguments=arguments)
    bad = desk.grant(first["id"], "alice", {"for": "1h", "match": {"card": {"prefix": "x"}}})
    assert bad.status_code == 400
    assert desk.grant(first["id"], "alice", {"for": "1h"}).status_code == 200
    assert desk.agent.new(arguments=arguments)["status"] == "approved"
    other = {**REFUND, "card": {"$redacted": "ba9876543210"}}
    assert desk.agent.new(arguments=other)["status"] == "pending"


def test_a_grant_never_carries_an_edit(desk: Desk) -> None:
    """An approval with edited arguments and a grant is refused (edits are per request)."""
    body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m", "editable": ["amount"]}
    first = desk.agent.new(body=body)
    answer = desk.grant(first["id"], "alice", {"for": "1h"}, arguments={**REFUND, "amount": 100})
    assert answer.status_code == 400
    assert desk.agent.poll(first["id"]).json()["status"] == "pending"


def test_a_grant_on_a_quorum_tool_is_pending_until_enough_approve_it(desk: Desk) -> None:
    """approvals_required = 2: the grant covers nothing until a second person approves it."""
    arguments = {"to": "acct_1", "amount": 10}
    first = desk.agent.new(tool="wire_money", arguments=arguments)
    answer = desk.grant(first["id"], "alice", {"for": "1h"})
    assert answer.status_code == 200, answer.text
    grant = answer.json()["grant"]
    assert grant["status"] == "pending"
    assert desk.agent.new(tool="wire_money", arguments=arguments)["status"] == "pending"
    bob = desk.as_("bob")
    url = f"{desk.server.url}/v1/grants/{grant['id']}/approve"
    again = desk.as_("alice").session.post(url, json={}, headers=desk.as_("alice").headers())
    assert again.status_code == 409 and error_type(again) == "already_approved"
    approved = bob.session.post(url, json={}, headers=bob.headers())
    assert approved.status_code == 200 and approved.json()["status"] == "live"
    assert approved.json()["granted_by"] == ["alice", "bob"]
    made = desk.agent.new(tool="wire_money", arguments=arguments)
    assert made["status"] == "approved" and made["decision"]["decided_by"] == "alice, bob"


def test_a_grant_never_approves_a_request_made_for_one_of_its_granters(desk: Desk) -> None:
    """self_approval = false: carol's own calls are not approved by carol's grant."""
    arguments = {"to": "acct_1", "amount": 10}
    body = {"tool": "wire_money", "arguments": arguments, "timeout": "30m", "requested_by": "dave"}
    first = desk.agent.new(body=body)
    grant = desk.grant(first["id"], "carol", {"for": "1h", "requested_by": "any"}).json()["grant"]
    bob = desk.as_("bob")
    bob.session.post(
        f"{desk.server.url}/v1/grants/{grant['id']}/approve", json={}, headers=bob.headers()
    )
    for who, expected in (("dave", "approved"), ("carol", "pending"), ("bob", "pending")):
        made = desk.agent.new(body={**body, "requested_by": who})
        assert made["status"] == expected, who


def test_removing_a_reviewer_ends_their_grants_at_once(desk: Desk) -> None:
    """reviewers remove: the next create is asked of a person; the grant lists as ended."""
    grant = granted(desk)["grant"]
    assert desk.store.remove_reviewer("alice")
    assert desk.agent.new()["status"] == "pending"
    every = desk.as_("bob").get("/v1/grants?all=1").json()["grants"]
    assert [(one["id"], one["status"]) for one in every] == [(grant["id"], "ended")]


def test_a_grant_may_decide_the_pending_requests_it_covers_when_asked(desk: Desk) -> None:
    """GET shows the covered pending ids; apply decides exactly those listed, by the grant."""
    waiting = [desk.agent.new(arguments={**REFUND, "amount": n})["id"] for n in (10, 20)]
    outside = desk.agent.new(arguments={**REFUND, "amount": 9999})["id"]
    grant = granted(desk)["grant"]
    bob, alice = desk.as_("bob"), desk.as_("alice")
    shown = alice.get(f"/v1/grants/{grant['id']}").json()
    assert shown["covers_pending"] == waiting
    url = f"{desk.server.url}/v1/grants/{grant['id']}/apply"
    refused = bob.session.post(url, json={"ids": waiting}, headers=bob.headers()).json()
    assert [one["error"]["type"] for one in refused["results"]] == ["forbidden", "forbidden"]
    results = alice.session.post(
        url, json={"ids": [waiting[0], outside]}, headers=alice.headers()
    ).json()["results"]
    assert results[0]["status"] == "approved" and results[0]["id"] == waiting[0]
    assert results[1]["error"]["type"] == "invalid_request"
    assert desk.agent.poll(waiting[1]).json()["status"] == "pending"
    assert desk.agent.poll(outside).json()["status"] == "pending"


def test_a_self_grant_is_refused_where_self_approval_is_off(desk: Desk) -> None:
    """carol may not approve her own request, so she may not give a grant on it: 403, nothing."""
    body = {
        "tool": "wire_money",
        "arguments": {"to": "acct_1", "amount": 10},
        "timeout": "30m",
        "requested_by": "carol",
    }
    first = desk.agent.new(body=body)
    answer = desk.grant(first["id"], "carol", {"for": "1h", "requested_by": "any"})
    assert answer.status_code == 403 and error_type(answer) == "forbidden"
    assert desk.as_("bob").get("/v1/grants?all=1").json()["grants"] == []
    assert desk.agent.poll(first["id"]).json()["approvals"] == []


def raw_grant(desk: Desk, request_id: str, who: str, text: str) -> requests.Response:
    """A decision whose body is JSON text (numbers such as 1e9999999999999999999999 as written)."""
    api = desk.as_(who)
    return api.session.post(
        f"{api.url}/v1/requests/{request_id}/decision",
        data=text.encode(),
        headers=api.headers(**{"Content-Type": "application/json"}),
        timeout=10,
    )


HUGE = "1e9999999999999999999999"  # valid JSON; more than any Decimal can hold


def test_numbers_beyond_decimals_reach_are_compared_exactly_never_a_500(desk: Desk) -> None:
    """A bound or a value of 1e9999999999999999999999 is compared exactly: 200/201, not 500."""
    first = desk.agent.new()
    given = raw_grant(
        desk,
        first["id"],
        "alice",
        '{"status": "approved", "grant": {"for": "1h", '
        f'"match": {{"amount": {{"min": 0.0, "max": {HUGE}}}}}}}}}',
    )
    assert given.status_code == 200, given.text
    for text, expected in (
        ("1e999999999999999999999", "approved"),
        ("1e-9999999999999999999999", "approved"),
        ("1e" + "9" * 5000, "pending"),
        ("1e99999999999999999999999", "pending"),
        ("-1e-9999999999999999999999", "pending"),
    ):
        body = (
            '{"tool": "issue_refund", "timeout": "30m", "arguments": '
            f'{{"payment_id": "payment_123", "amount": {text}, "currency": "GBP"}}}}'
        )
        answer = raw_create(desk.agent, body)
        assert answer.status_code == 201, (text[:40], answer.text)
        assert answer.json()["status"] == expected, text[:40]


def test_a_bound_whose_exponent_no_comparison_can_hold_is_a_400(desk: Desk) -> None:
    """max = 1e<5000 digits> is refused (400) and records nothing."""
    first = desk.agent.new()
    answer = raw_grant(
        desk,
        first["id"],
        "alice",
        '{"status": "approved", "grant": {"for": "1h", '
        f'"match": {{"amount": {{"min": 1, "max": 1e{"9" * 5000}}}}}}}}}',
    )
    assert answer.status_code == 400, answer.text
    assert desk.agent.poll(first["id"]).json()["status"] == "pending"


def test_a_grant_covers_nothing_once_its_tool_needs_more_approvals_than_gave_it(
    desk: Desk,
) -> None:
    """Restarted with approvals_required = 2, alice's grant alone approves nothing."""
    granted(desk)
    desk.server.close()
    stricter = RULES.replace('max_grant = "2h"', 'max_grant = "2h"\napprovals_required = 2')
    desk.server = ProviderServer(desk.store, rules=parse_rules(stricter))
    desk.server.start()
    agent = Api(desk.server.url, desk.tokens["instance"])
    made = agent.new()
    assert made["status"] == "pending", made.get("decision")
    assert made["approvals_required"] == 2


def test_a_standing_denial_for_one_person_holds_for_their_name_in_another_case(
    desk: Desk,
) -> None:
    """Denied for dave's calls ("same"): "Dave" is denied too, not approved by an "any" grant."""
    granted(desk, {"for": "1h", "requested_by": "any", "match": {"amount": "any"}})
    body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m", "requested_by": "dave"}
    first = desk.agent.new(body=body)
    assert first["status"] == "approved"  # alice's grant covers anyone's call
    other = desk.agent.new(body={**body, "arguments": {**REFUND, "currency": "EUR"}})
    answer = desk.as_("bob").decide(
        other["id"],
        {"status": "denied", "grant": {"for": "1h", "match": {"currency": "any"}}},
    )
    assert answer.status_code == 200, answer.text
    for who in ("dave", "Dave", "\uff44ave"):
        made = desk.agent.new(body={**body, "requested_by": who})
        assert made["status"] == "denied", who
    assert desk.agent.new(body={**body, "requested_by": "erin"})["status"] == "approved"


def test_a_grant_is_not_applied_to_pending_requests_once_its_tool_turns_grants_off(
    desk: Desk,
) -> None:
    """Restarted with grants = false on the tool, apply decides nothing (as a create would not)."""
    waiting = desk.agent.new(arguments={**REFUND, "amount": 10})["id"]
    grant = granted(desk)["grant"]
    desk.server.close()
    off = RULES.replace('max_grant = "2h"', 'max_grant = "2h"\ngrants = false')
    desk.server = ProviderServer(desk.store, rules=parse_rules(off))
    desk.server.start()
    alice = Api(desk.server.url, desk.tokens["alice"])
    agent = Api(desk.server.url, desk.tokens["instance"])
    assert agent.new(arguments={**REFUND, "amount": 10})["status"] == "pending"
    url = f"{desk.server.url}/v1/grants/{grant['id']}/apply"
    results = alice.session.post(url, json={"ids": [waiting]}, headers=alice.headers()).json()
    assert "error" in results["results"][0], results
    assert agent.poll(waiting).json()["status"] == "pending"


def test_covers_pending_counts_only_the_requests_apply_would_decide(
    store_kind: tuple[str, str | None],  # noqa: F811
    tmp_path: Path,
) -> None:
    """self_approval = false: alice's grant never lists (nor decides) a call made for alice."""
    kind, dsn = store_kind
    rules = "[tools.issue_refund]\nself_approval = false\n"
    opened = open_desk(kind, dsn, rules, tmp_path=tmp_path)
    try:
        body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m"}
        hers = opened.agent.new(body={**body, "requested_by": "alice"})["id"]
        daves = opened.agent.new(body={**body, "requested_by": "dave"})["id"]
        first = opened.agent.new(body={**body, "requested_by": "erin"})
        answer = opened.grant(first["id"], "alice", {"for": "1h", "requested_by": "any"})
        assert answer.status_code == 200, answer.text
        grant_id = answer.json()["grant"]["id"]
        shown = opened.as_("alice").get(f"/v1/grants/{grant_id}").json()
        assert shown["covers_pending"] == [daves]
        assert hers != daves
    finally:
        opened.server.close()
        opened.store.close()
