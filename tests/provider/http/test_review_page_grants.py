"""The review page's grant endpoints over real HTTP: the offer, the list's display, exact scopes.

``GET /review/requests/{id}/grant-offer`` (what "Approve, and allow …" may
offer), ``GET /review/grants`` (live and pending grants with escaped display
texts) and the page's decision with ``grant.match_texts`` (constraints as JSON
texts, parsed exactly by the provider). The browser side is
``tests/browser/test_review_page_grants.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from approval_guard.provider.rules.config import parse_rules
from approval_guard.testing import LocalProvider
from tests.provider.http.test_editable_arguments import MARKER
from tests.support.api import Api, signed_in

RULES = """\
[tools.issue_refund]
max_grant = "4h"

[tools.delete_user]
grants = false

[tools.wire_money]
approvers = ["treasury"]

[[tools.send_receipt.auto]]
name = "receipts"
decision = "approve"
match = { currency = { in = ["GBP"] } }
"""


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[LocalProvider]:
    with LocalProvider(db=str(tmp_path / "page.sqlite3"), rules=parse_rules(RULES)) as provider:
        yield provider


def page_get(provider: LocalProvider, path: str) -> requests.Response:
    session, csrf = signed_in(provider)
    return session.get(f"{provider.url}{path}", headers={"X-CSRF-Token": csrf}, timeout=10)


def page_decide(provider: LocalProvider, request_id: str, body: Any) -> requests.Response:
    session, csrf = signed_in(provider)
    return session.post(
        f"{provider.url}/review/requests/{request_id}/decision",
        json=body,
        headers={"X-CSRF-Token": csrf},
        timeout=10,
    )


def offer_of(provider: LocalProvider, request_id: str) -> Any:
    answer = page_get(provider, f"/review/requests/{request_id}/grant-offer")
    assert 200 == answer.status_code, answer.text
    return answer.json()


def test_the_offer_lists_durations_within_max_grant_and_constraints_by_value(
    desk: LocalProvider,
) -> None:
    """Durations to max_grant; a range for a number, a prefix for a string, neither if redacted."""
    made = Api(desk.url, desk.credential).new(
        arguments={"amount": 4900, "currency": "GBP", "card": MARKER, "ok": True}
    )
    offer = offer_of(desk, made["id"])["offer"]
    assert ["5m", "15m", "30m", "1h", "4h"] == offer["durations"]
    assert "1h" == offer["default"]
    kinds = {arg["key"]: arg["kinds"] for arg in offer["arguments"]}
    assert {
        "amount": ["same", "any", "range", "in"],
        "card": ["same", "any"],
        "currency": ["same", "any", "prefix", "in"],
        "ok": ["same", "any", "in"],
    } == kinds
    card = next(arg for arg in offer["arguments"] if arg["key"] == "card")
    assert (card["same"], card["text"]) == ("card is exactly the same redacted value", None)


def test_the_offer_escapes_hidden_characters_in_names_and_values(desk: LocalProvider) -> None:
    """A bidi override in a name or a value is shown as \\u202e, never as itself."""
    made = Api(desk.url, desk.credential).new(arguments={"na\u202eme": "va\u202elue"})
    [arg] = offer_of(desk, made["id"])["offer"]["arguments"]
    assert "na\u202eme" == arg["key"]  # what is sent back: the name itself
    assert "na\\u202eme" == arg["name"]
    assert '"va\\u202elue"' in arg["same"] and "\u202e" not in arg["same"]


def test_no_offer_where_grants_are_off_nor_for_a_reviewer_who_may_not_decide(
    desk: LocalProvider,
) -> None:
    """grants = false: offer null with the reason; a reviewer without the role: 403."""
    agent = Api(desk.url, desk.credential)
    off = offer_of(desk, agent.new(tool="delete_user", arguments={"user": "u1"})["id"])
    assert off["offer"] is None and "grants = false" in off["reason"]
    refused = page_get(desk, f"/review/requests/{agent.new(tool='wire_money')['id']}/grant-offer")
    assert 403 == refused.status_code


def test_the_offer_of_a_decided_request_is_409_and_of_none_404(desk: LocalProvider) -> None:
    """Only a pending request has an offer."""
    made = Api(desk.url, desk.credential).new()
    assert 200 == page_decide(desk, made["id"], {"status": "approved"}).status_code
    assert 409 == page_get(desk, f"/review/requests/{made['id']}/grant-offer").status_code
    assert 404 == page_get(desk, "/review/requests/nope/grant-offer").status_code


def test_match_texts_are_parsed_exactly(desk: LocalProvider) -> None:
    """A bound past 2**53 and a decimal arrive exactly as typed, never through a float."""
    made = Api(desk.url, desk.credential).new(arguments={"amount": 5, "rate": 0.5})
    grant = {
        "for": "30m",
        "match_texts": {
            "amount": '{"min": 1, "max": 9007199254740993}',
            "rate": '{"max": 0.1000000000000000055511151231257827}',
        },
    }
    answer = page_decide(desk, made["id"], {"status": "approved", "grant": grant})
    assert 200 == answer.status_code, answer.text
    raw = answer.text
    assert '"max":9007199254740993' in raw.replace(" ", "")
    assert '"max":0.1000000000000000055511151231257827' in raw.replace(" ", "")


@pytest.mark.parametrize(
    "grant",
    [
        {"for": "30m", "match_texts": {"amount": "{min: 1}"}},
        {"for": "30m", "match_texts": {"amount": 5}},
        {"for": "30m", "match_texts": {"amount": '"same"'}, "match": {}},
        {"for": "30m", "match_texts": {"amount": '{"prefix": "x"}', "nope": '"any"'}},
        {"for": "5h", "match_texts": {}},
    ],
)
def test_a_bad_page_grant_is_400_and_decides_nothing(desk: LocalProvider, grant: Any) -> None:
    """Not JSON, not text, both forms, an unknown argument, beyond max_grant: 400, nothing."""
    agent = Api(desk.url, desk.credential)
    made = agent.new(arguments={"amount": 5})
    answer = page_decide(desk, made["id"], {"status": "approved", "grant": grant})
    assert 400 == answer.status_code, answer.text
    assert "pending" == agent.poll(made["id"]).json()["status"]


def test_the_grants_list_carries_escaped_display_texts(desk: LocalProvider) -> None:
    """Each grant has display: tool, granted_by, the scope in words, escaped."""
    made = Api(desk.url, desk.credential).new(arguments={"memo": "a\u202eb", "amount": 5})
    grant = {"for": "1h", "uses": 3, "match_texts": {"amount": '{"min": 1, "max": 10}'}}
    assert 200 == page_decide(desk, made["id"], {"status": "approved", "grant": grant}).status_code
    answer = page_get(desk, "/review/grants")
    assert 200 == answer.status_code
    [shown] = answer.json()["grants"]
    display = shown["display"]
    assert "issue_refund" == display["tool"]
    assert [
        "approves calls to issue_refund from agent testing instance",
        "amount is a whole number from 1 to 10",
        'memo is exactly "a\\u202eb"',
        "only calls that, like this one, name nobody they are made for",
    ] == display["scope"]
    assert (shown["uses"], shown["uses_left"]) == (3, 3)


def test_an_agent_credential_gets_no_grants_list_nor_offer(desk: LocalProvider) -> None:
    """The page's grant endpoints are a reviewer's: an agent's bearer token is 403."""
    agent = Api(desk.url, desk.credential)
    made = agent.new()
    for path in ("/review/grants", f"/review/requests/{made['id']}/grant-offer"):
        assert 403 == agent.get(path).status_code


def test_decided_through_names_a_grant_or_a_rule_never_a_look_alike_reviewer(
    desk: LocalProvider,
) -> None:
    """A grant's or a rule's decision says so; a reviewer named "rule:nothing" is a person."""
    agent = Api(desk.url, desk.credential)
    reviewer = Api(desk.url, desk.reviewer_credential)
    by_rule = agent.new(tool="send_receipt", arguments={"currency": "GBP"})
    first = agent.new(arguments={"amount": 5})
    given = page_decide(desk, first["id"], {"status": "approved", "grant": {"for": "1h"}})
    by_grant = agent.new(arguments={"amount": 5})
    # Made past the name check (as an old database might hold one): still a person.
    token = desk.server.store.create_credential("reviewer", "rule:nothing")
    by_person = agent.new(tool="send_receipt", arguments={"currency": "EUR"})
    assert 200 == Api(desk.url, token).decide(by_person["id"], {"status": "approved"}).status_code

    listed = {r["id"]: r["display"] for r in reviewer.get("/v1/requests").json()["requests"]}
    grant_id = given.json()["grant"]["id"]
    assert "rule receipts" == listed[by_rule["id"]]["decided_through"]
    assert f"grant {grant_id} of testing reviewer" == listed[by_grant["id"]]["decided_through"]
    assert "decided_through" not in listed[by_person["id"]]
    assert "decided_through" not in listed[first["id"]]


def test_a_reviewer_may_not_be_named_like_a_rule(desk: LocalProvider) -> None:
    """ "rule:receipts" (any case, any space before it) is refused: it would read as the rule."""
    from approval_guard.provider.store.sql.credentials import ReviewerNameError

    for name in ("rule:receipts", "RULE:x", " rule:y"):
        with pytest.raises(ReviewerNameError, match="rule:"):
            desk.server.store.add_reviewer(name)
    assert all(not one.name.startswith("rule") for one in desk.server.store.list_reviewers())


def test_the_page_lists_at_most_the_newest_grants_and_says_how_many(
    desk: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_PAGE_GRANTS the list is cut to the newest, and total counts them all."""
    from approval_guard.provider.http import page

    agent = Api(desk.url, desk.credential)
    for n in range(3):
        made = agent.new(arguments={"n": n})
        body = {"status": "approved", "grant": {"for": "1h"}}
        assert 200 == page_decide(desk, made["id"], body).status_code
    monkeypatch.setattr(page, "MAX_PAGE_GRANTS", 2)
    answer = page_get(desk, "/review/grants").json()
    assert (2, 3) == (len(answer["grants"]), answer["total"])
    assert ["n is exactly 2", "n is exactly 1"] == [
        one["display"]["scope"][1] for one in answer["grants"]
    ]
