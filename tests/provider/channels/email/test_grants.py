"""The email confirmation page's "and allow calls like this for …" (API 1.3): a same-scope grant."""

from __future__ import annotations

from typing import Any

import requests

from tests.support.mail_team import MailTeam, confirm_page, page_text, post_decision, token_of

REFUND: dict[str, Any] = {"payment_id": "payment_123", "amount": 4900}


def _new(team: MailTeam, arguments: dict[str, Any] = REFUND) -> dict[str, Any]:
    body = {"tool": "issue_refund", "arguments": arguments, "timeout": "30m"}
    return team.instance.new(body=body)


def _grants(team: MailTeam) -> list[dict[str, Any]]:
    answer = requests.get(
        f"{team.server.url}/v1/grants",
        headers={"Authorization": f"Bearer {team.tokens['alice']}"},
        timeout=10,
    )
    assert 200 == answer.status_code, answer.text
    return list(answer.json()["grants"])


def test_the_approve_page_offers_a_grant_and_the_deny_page_does_not(team: MailTeam) -> None:
    """Approve shows the durations within max_grant and the scope in words; deny shows none."""
    created = _new(team)
    links = team.mail_for(str(created["id"]), "alice@example.com").links()
    shown = confirm_page(links["approve"])
    assert 'data-testid="grant-for"' in shown.text
    assert '<option value="1h">1h</option>' in shown.text
    assert '<option value="4h">' not in shown.text  # the default max_grant is 1h
    assert "payment_id is exactly &quot;payment_123&quot;" in shown.text
    assert 'data-testid="grant"' not in confirm_page(links["deny"]).text


def test_approving_with_a_grant_by_email_covers_the_next_identical_call(team: MailTeam) -> None:
    """The form's grant_for gives a same-scope grant; the next identical create is decided by it."""
    created = _new(team)
    token = token_of(team.mail_for(str(created["id"]), "alice@example.com").links()["approve"])
    done = post_decision(
        team.server.url, str(created["id"]), token, note="", grant_for="30m", grant_uses="5"
    )
    assert 200 == done.status_code, done.text
    [grant] = _grants(team)
    assert (grant["granted_by"], grant["uses"], grant["from_request"]) == (
        ["alice"],
        5,
        created["id"],
    )
    assert grant["match"] == {"amount": "same", "payment_id": "same"}
    assert f"Standing grant {grant['id']} approves calls like this one" in page_text(done)
    row = [r for r in team.store.audit(request_id=str(created["id"])) if r.action == "grant.given"]
    assert ["alice"] == [one.actor for one in row]

    again = _new(team)
    assert ("approved", grant["id"]) == (again["status"], again["decision"]["grant"]["id"])
    assert "pending" == _new(team, {**REFUND, "amount": 4901})["status"]


def test_no_duration_chosen_is_a_plain_approval(team: MailTeam) -> None:
    """The form's grant_for left empty approves this call only."""
    created = _new(team)
    token = token_of(team.mail_for(str(created["id"]), "alice@example.com").links()["approve"])
    done = post_decision(team.server.url, str(created["id"]), token, grant_for="", grant_uses="")
    assert 200 == done.status_code, done.text
    assert "approved" == team.instance.poll(str(created["id"])).json()["status"]
    assert [] == _grants(team)


def test_a_bad_grant_in_the_form_is_refused_and_decides_nothing(team: MailTeam) -> None:
    """Beyond max_grant, bad uses, uses without a duration, or a grant on a deny link: 400."""
    created = _new(team)
    links = team.mail_for(str(created["id"]), "alice@example.com").links()
    approve, deny = token_of(links["approve"]), token_of(links["deny"])
    for token, fields in (
        (approve, {"grant_for": "2h"}),
        (approve, {"grant_for": "30m", "grant_uses": "0"}),
        (approve, {"grant_for": "30m", "grant_uses": "\u0663"}),
        (approve, {"grant_for": "", "grant_uses": "3"}),
        (deny, {"grant_for": "30m"}),
    ):
        refused = post_decision(team.server.url, str(created["id"]), token, **fields)
        assert 400 == refused.status_code, fields
    assert "pending" == team.instance.poll(str(created["id"])).json()["status"]
    assert [] == _grants(team)


def test_the_scope_words_on_the_page_are_escaped(team: MailTeam) -> None:
    """Markup and a bidi override in a value show as text, escaped, on the approve page."""
    created = _new(team, {"memo": "<b>x</b>\u202e", "amount": 1})
    shown = confirm_page(team.mail_for(str(created["id"]), "alice@example.com").links()["approve"])
    assert "<b>x</b>" not in shown.text and "\u202e" not in shown.text
    assert "memo is exactly &quot;&lt;b&gt;x&lt;/b&gt;\\u202e&quot;" in shown.text
