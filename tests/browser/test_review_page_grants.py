"""Standing grants on the review page, in a real headless browser: give, see covered, list, revoke.

A real provider (ProviderServer on a SQLite file, with a rules file) on
127.0.0.1; alice and bob sign in with their own tokens. Without playwright or
chromium these tests skip (and fail when ``CI`` is set), as in
``tests/browser/test_review_page.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import requests

from approval_guard.provider import ProviderServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.browser

TIMEOUT_MS = 5_000
RULES = """\
[tools.issue_refund]
max_grant = "2h"

[tools.wire_money]
approvals_required = 2

[tools.delete_user]
grants = false

[[tools.send_receipt.auto]]
name = "receipts in GBP"
decision = "approve"
match = { currency = { in = ["GBP"] } }
"""
REFUND = {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}


@attrs.define
class Desk:
    """One provider with the rules file, the agent's token, reviewers' browser contexts."""

    server: ProviderServer
    instance: str
    tokens: dict[str, str]
    browser: Browser
    contexts: list[BrowserContext] = attrs.field(factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def sign_in(self, name: str) -> Page:
        """A fresh browser context signed in as ``name``, once the page is live."""
        context = self.browser.new_context(viewport={"width": 1100, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        page.goto(f"{self.url}/?token={self.tokens[name]}")
        page.get_by_test_id("sign-in").click()  # the link alone signs nobody in
        page.wait_for_selector('[data-testid="live"][data-state="live"]')
        return page

    def create(self, tool: str = "issue_refund", arguments: dict[str, Any] | None = None) -> Any:
        """A create over HTTP, as an adapter makes it; the answer's JSON."""
        response = requests.post(
            f"{self.url}/v1/requests",
            json={"tool": tool, "arguments": arguments or REFUND, "timeout": "30m"},
            headers={
                "Authorization": f"Bearer {self.instance}",
                "Idempotency-Key": str(uuid.uuid4()),
            },
            timeout=5,
        )
        assert 201 == response.status_code, response.text
        return response.json()

    def get(self, path: str, who: str = "alice") -> Any:
        response = requests.get(
            f"{self.url}{path}",
            headers={"Authorization": f"Bearer {self.tokens[who]}"},
            timeout=5,
        )
        assert 200 == response.status_code, response.text
        return response.json()


@pytest.fixture
def desk(browser: Browser, tmp_path: Path) -> Iterator[Desk]:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    server = ProviderServer(str(tmp_path / "grants.sqlite3"), rules=rules)
    server.start()
    first = server.first_start_tokens
    assert first is not None
    made = Desk(server=server, instance=first.instance, tokens={}, browser=browser)
    for name in ("alice", "bob"):
        made.tokens[name] = server.store.add_reviewer(name)
    try:
        yield made
    finally:
        for context in made.contexts:
            context.close()
        server.close()


def card(page: Page, request_id: str) -> Any:
    return page.get_by_test_id("pending-list").locator(f'[data-testid="request-{request_id}"]')


def done_card(page: Page, request_id: str) -> Any:
    return page.get_by_test_id("done-list").locator(f'[data-testid="request-{request_id}"]')


def open_offer(page: Page, request_id: str) -> Any:
    """The request's "Approve, and allow …" block, opened and loaded."""
    shown = card(page, request_id)
    shown.get_by_test_id("grant-offer-toggle").click()
    shown.get_by_test_id("approve-grant").wait_for()
    return shown


def argument(shown: Any, name: str) -> Any:
    return shown.locator(f'[data-testid="grant-arg"][data-name="{name}"]')


def give_amount_range(shown: Any, low: str, high: str, *, uses: str = "") -> None:
    row = argument(shown, "amount")
    row.get_by_test_id("grant-kind").select_option("range")
    row.get_by_test_id("grant-min").fill(low)
    row.get_by_test_id("grant-max").fill(high)
    if uses:
        shown.get_by_test_id("grant-uses").fill(uses)
    shown.get_by_test_id("approve-grant").click()


# ----------------------------------------------------------------------------- tests


def test_a_grant_given_on_the_page_covers_the_next_call_and_is_listed_then_revoked(
    desk: Desk,
) -> None:
    """Give a grant from the page; the next call is approved by it; it is listed; revoke it."""
    first = desk.create()
    page = desk.sign_in("alice")
    shown = open_offer(page, first["id"])
    durations = shown.get_by_test_id("grant-for").locator("option").all_text_contents()
    assert durations == ["5m", "15m", "30m", "1h", "2h"]  # within max_grant = "2h"
    assert "1h" == shown.get_by_test_id("grant-for").input_value()
    words = shown.get_by_test_id("grant-words")
    assert 'payment_id is exactly "payment_123"' in words.text_content()

    give_amount_range(shown, "1", "5000", uses="3")
    done_card(page, first["id"]).wait_for()

    [grant] = desk.get("/v1/grants")["grants"]
    assert grant["match"] == {
        "amount": {"min": 1, "max": 5000},
        "currency": "same",
        "payment_id": "same",
    }
    assert (grant["uses"], grant["granted_by"], grant["from_request"]) == (
        3,
        ["alice"],
        first["id"],
    )

    covered = desk.create(arguments={**REFUND, "amount": 1200})
    assert covered["status"] == "approved"
    assert covered["decision"]["grant"]["id"] == grant["id"]
    outcome = done_card(page, covered["id"]).get_by_test_id("outcome")
    outcome.wait_for()
    assert outcome.text_content().startswith(f"Approved by grant {grant['id']} of alice at ")

    listed = page.get_by_test_id(f"grant-{grant['id']}")
    listed.get_by_test_id("grant-uses-left").filter(has_text="2 of 3 uses left").wait_for()
    scope = listed.get_by_test_id("grant-scope").inner_text()
    assert "amount is a whole number from 1 to 5000" in scope
    assert "only calls that, like this one, name nobody they are made for" in scope
    assert "given by alice" in listed.get_by_test_id("grant-by").inner_text()
    assert "left" in listed.get_by_test_id("grant-time-left").inner_text()

    listed.get_by_test_id("grant-revoke-note").fill("done with the duplicates")
    listed.get_by_test_id("grant-revoke").click()
    listed.wait_for(state="detached")
    assert "0" == page.get_by_test_id("grants-count").text_content()
    shown_after = desk.get(f"/v1/grants/{grant['id']}")
    assert shown_after["status"] == "revoked"
    assert desk.create(arguments={**REFUND, "amount": 1300})["status"] == "pending"


def test_a_new_grant_decides_covered_pending_requests_only_when_asked(desk: Desk) -> None:
    """ "Covers N pending requests: decide them too?" decides exactly those, only on a click."""
    first = desk.create()
    inside = desk.create(arguments={**REFUND, "amount": 100})
    outside = desk.create(arguments={**REFUND, "amount": 9000})
    page = desk.sign_in("alice")
    give_amount_range(open_offer(page, first["id"]), "1", "5000")

    followup = page.get_by_test_id("grant-followup")
    asked = followup.get_by_test_id("grant-covers-pending")
    asked.wait_for()
    assert "This grant also covers 1 pending request: decide them too?" == asked.text_content()
    assert desk.get(f"/v1/requests/{inside['id']}")["status"] == "pending"

    followup.get_by_test_id("grant-apply").click()
    followup.get_by_test_id("grant-apply-result").filter(has_text="Decided 1 of 1.").wait_for()
    assert desk.get(f"/v1/requests/{inside['id']}")["status"] == "approved"
    assert desk.get(f"/v1/requests/{outside['id']}")["status"] == "pending"


def test_the_offer_shows_hostile_names_and_values_escaped(desk: Desk) -> None:
    """An argument's name and value with markup and a bidi override are literal, escaped text."""
    hostile = {"<img src=x onerror=alert(1)>": "a\u202egpj.exe", "amount": 5}
    first = desk.create(arguments=hostile)
    page = desk.sign_in("alice")
    shown = open_offer(page, first["id"])

    options = " ".join(
        shown.get_by_test_id("grant-kind").first.locator("option").all_text_contents()
    )
    assert '<img src=x onerror=alert(1)> is exactly "a\\u202egpj.exe"' in options
    assert "\u202e" not in shown.inner_text()
    assert 0 == page.locator("img[src=x]").count()

    shown.get_by_test_id("approve-grant").click()
    listed = page.get_by_test_id("grants-list").locator("li.grant-card")
    listed.wait_for()
    scope = listed.get_by_test_id("grant-scope").inner_text()
    assert '<img src=x onerror=alert(1)> is exactly "a\\u202egpj.exe"' in scope
    assert 0 == page.locator("img[src=x]").count()


def test_a_string_argument_offers_starts_with_and_a_number_a_range(desk: Desk) -> None:
    """Each argument offers only the constraints its value can take."""
    first = desk.create()
    page = desk.sign_in("alice")
    shown = open_offer(page, first["id"])

    def kinds(name: str) -> list[str]:
        kind = argument(shown, name).get_by_test_id("grant-kind")
        return [one.get_attribute("value") for one in kind.locator("option").all()]

    assert kinds("amount") == ["same", "any", "range", "in"]
    assert kinds("currency") == ["same", "any", "prefix", "in"]
    row = argument(shown, "payment_id")
    row.get_by_test_id("grant-kind").select_option("prefix")
    assert '"payment_123"' == row.get_by_test_id("grant-prefix").input_value()
    row.get_by_test_id("grant-prefix").fill('"payment_"')
    assert 'payment_id starts with "payment_"' in shown.get_by_test_id("grant-words").text_content()
    shown.get_by_test_id("approve-grant").click()
    [grant] = _wait_grants(desk, page)
    assert grant["match"]["payment_id"] == {"prefix": "payment_"}


def test_a_redacted_argument_offers_only_same_or_any(desk: Desk) -> None:
    """A guard's redaction marker: "exactly the same redacted value" or "anything", nothing else."""
    first = desk.create(arguments={"card": {"$redacted": "1a2b3c4d5e6f"}, "amount": 5})
    page = desk.sign_in("alice")
    shown = open_offer(page, first["id"])
    kind = argument(shown, "card").get_by_test_id("grant-kind")
    assert ["same", "any"] == [one.get_attribute("value") for one in kind.locator("option").all()]
    assert [
        "card is exactly the same redacted value",
        "card may be anything",
    ] == kind.locator("option").all_text_contents()
    kind.select_option("any")
    shown.get_by_test_id("approve-grant").click()
    [grant] = _wait_grants(desk, page)
    assert {"amount": "same", "card": "any"} == grant["match"]


def test_a_quorum_grant_is_pending_until_a_second_reviewer_approves_it(desk: Desk) -> None:
    """For approvals_required = 2 the grant waits for bob, who approves it from his page."""
    first = desk.create(tool="wire_money")
    alice = desk.sign_in("alice")
    open_offer(alice, first["id"]).get_by_test_id("approve-grant").click()
    [grant] = _wait_grants(desk, alice)
    assert grant["status"] == "pending"

    bob = desk.sign_in("bob")
    listed = bob.get_by_test_id(f"grant-{grant['id']}")
    assert "1 of 2 approvals: alice" == listed.get_by_test_id("grant-approvals").text_content()
    listed.get_by_test_id("grant-approve").click()
    bob.get_by_test_id(f"grant-{grant['id']}").locator('[data-testid="status"]').filter(
        has_text="live"
    ).wait_for()
    assert desk.get(f"/v1/grants/{grant['id']}")["granted_by"] == ["alice", "bob"]


def test_a_tool_with_grants_off_offers_none(desk: Desk) -> None:
    """grants = false: opening the offer says so, and no "Approve and allow" button shows."""
    first = desk.create(tool="delete_user", arguments={"user": "u1"})
    shown = card(desk.sign_in("alice"), first["id"])
    shown.get_by_test_id("grant-offer-toggle").click()
    said = shown.get_by_test_id("grant-unavailable")
    said.wait_for()
    assert "turned off for delete_user" in said.text_content()
    assert not shown.get_by_test_id("approve-grant").is_visible()


def test_a_request_decided_by_a_rule_names_the_rule(desk: Desk) -> None:
    """A rules-file auto-decision shows "Approved by rule NAME"."""
    decided = desk.create(tool="send_receipt", arguments={"currency": "GBP"})
    assert decided["status"] == "approved"
    page = desk.sign_in("alice")
    outcome = done_card(page, decided["id"]).get_by_test_id("outcome")
    assert outcome.text_content().startswith("Approved by rule receipts in GBP at ")


def _wait_grants(desk: Desk, page: Page) -> list[Any]:
    """The live and pending grants, once the page lists the one it gave."""
    page.get_by_test_id("grants-list").locator("li.grant-card").first.wait_for()
    grants: list[Any] = desk.get("/v1/grants")["grants"]
    return grants
