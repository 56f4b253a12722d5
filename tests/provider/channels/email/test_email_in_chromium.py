"""Email links followed in headless Chromium: confirm, click, and the waiting guarded call runs.

A guarded tool waits in a thread on a real provider (SQLite or PostgreSQL)
over real HTTP; its request is mailed through a real SMTP server; the
reviewer opens the mail's link in Chromium (which decides nothing), then
clicks the confirmation's button. Without playwright or chromium these tests
skip on a developer's machine, and fail when ``CI`` is set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

import approval_guard as ag
from tests.browser.conftest import browser  # noqa: F401 - the Chromium fixture
from tests.support.api import wait_for
from tests.support.browser import TIMEOUT_MS
from tests.support.guards import finish, in_thread
from tests.support.mail_team import MailTeam

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser


@pytest.fixture
def tab(browser: Browser) -> Iterator[Callable[[], Page]]:  # noqa: F811
    """``tab()``: a fresh browser context's page (a person's own browser)."""
    contexts = []

    def new() -> Page:
        context = browser.new_context(viewport={"width": 1000, "height": 800})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield new
    for context in contexts:
        context.close()


def guarded(team: MailTeam, tool: str, ran: list[Any]) -> Callable[[], Any]:
    guard = ag.Guard(
        base_url=team.server.url,
        credential=team.tokens["instance"],
        harness_limit="2m",
        poll_wait="5s",
        return_margin="1s",
        deadline_margin="1s",
        ledger=ag.MemoryLedger(),
    )

    @guard.requires_approval(tool=tool, timeout="30m")
    def refund(payment_id: str, amount: int) -> dict[str, Any]:
        ran.append((payment_id, amount))
        return {"refunded": amount}

    return lambda: refund("payment_123", 4900)


def pending_id(team: MailTeam) -> str:
    def listed() -> list[Any]:
        found = team.reviewer("alice").session.get(
            f"{team.server.url}/v1/requests?status=pending",
            headers=team.reviewer("alice").headers(),
            timeout=5,
        )
        requests: list[Any] = found.json()["requests"]
        return requests

    request_id: str = wait_for(listed, timeout=15, what="the guarded call made no request")[0]["id"]
    return request_id


def test_a_click_approves_and_the_waiting_guarded_call_runs(
    team: MailTeam, tab: Callable[[], Page]
) -> None:
    """Opening the link shows the call and decides nothing; the button approves; the tool runs."""
    ran: list[Any] = []
    thread, box = in_thread(guarded(team, "issue_refund", ran))
    request_id = pending_id(team)
    links = team.mail_for(request_id, "alice@example.com").links()

    page = tab()
    page.goto(links["approve"])
    page.wait_for_selector('[data-testid="email-page"][data-state="confirm"]')
    assert '"payment_id": "payment_123"' in (page.get_by_test_id("arguments").text_content() or "")
    page.wait_for_timeout(300)  # anything the browser fetched by itself has come by now
    assert "pending" == team.instance.poll(request_id).json()["status"]
    assert ([], True) == (ran, thread.is_alive())

    page.get_by_test_id("note").fill("Duplicate charge confirmed.")
    page.get_by_test_id("confirm").click()
    page.wait_for_selector('[data-testid="email-page"][data-state="done"]')
    assert "The call may now run." == page.get_by_test_id("result").text_content()

    assert {"refunded": 4900} == finish(thread, box)
    assert [("payment_123", 4900)] == ran
    decision = team.instance.poll(request_id).json()["decision"]
    assert ("alice", "Duplicate charge confirmed.") == (decision["decided_by"], decision["note"])

    page.goto(links["approve"])  # the same link again, in the same browser
    page.wait_for_selector('[data-testid="email-page"][data-state="refused"]')
    assert [("payment_123", 4900)] == ran


def test_the_deny_link_denies_and_the_call_does_not_run(
    team: MailTeam, tab: Callable[[], Page]
) -> None:
    """bob's deny link, confirmed: the guarded call returns NotRun(DENIED) with his note."""
    ran: list[Any] = []
    thread, box = in_thread(guarded(team, "issue_refund", ran))
    request_id = pending_id(team)
    page = tab()
    page.goto(team.mail_for(request_id, "bob@example.com").links()["deny"])
    page.get_by_test_id("note").fill("Not a duplicate.")
    page.get_by_test_id("confirm").click()
    page.wait_for_selector('[data-testid="email-page"][data-state="done"]')
    out = finish(thread, box)
    assert isinstance(out, ag.NotRun)
    assert (ag.Reason.DENIED, "Not a duplicate.") == (out.reason, out.note)
    assert [] == ran


def test_two_people_one_by_email_one_on_the_review_page(
    team: MailTeam, tab: Callable[[], Page]
) -> None:
    """big_refund needs two: alice by her mail's link, then bob on the review page; then it runs."""
    from playwright.sync_api import expect

    ran: list[Any] = []
    thread, box = in_thread(guarded(team, "big_refund", ran))
    request_id = pending_id(team)

    mail = tab()
    mail.goto(team.mail_for(request_id, "alice@example.com").links()["approve"])
    mail.get_by_test_id("confirm").click()
    mail.wait_for_selector('[data-testid="email-page"][data-state="done"]')
    assert "1 of 2 approvals so far." == mail.get_by_test_id("result").text_content()
    stored = team.store.get_request(request_id)
    assert stored is not None and "pending" == stored.status  # one approval of two
    # A call still waiting takes no step to wait on: a window shows it did not run.
    time.sleep(0.3)
    assert ([], True) == (ran, thread.is_alive())

    page = tab()
    page.goto(f"{team.server.url}/?token={team.tokens['bob']}")
    page.get_by_test_id("sign-in").click()  # the link alone signs nobody in
    page.wait_for_selector('[data-testid="live"][data-state="live"]')
    mine = page.locator(f'[data-testid="request-{request_id}"]')
    expect(mine.get_by_test_id("approvals")).to_have_text("1 of 2 approvals: alice")
    mine.get_by_test_id("approve").click()

    assert {"refunded": 4900} == finish(thread, box)
    rows = [r for r in team.store.audit(request_id=request_id) if r.action == "request.approval"]
    assert [("alice", "email"), ("bob", "page")] == [(r.actor, r.detail["channel"]) for r in rows]
