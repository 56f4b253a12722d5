"""The review page in a real headless browser: Debian's chromium driven by Playwright.

Without playwright or chromium these tests skip, with the reason, on a
developer's machine, and fail when ``CI`` is set: CI must not pass by skipping.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import requests

import approval_guard as ag
from approval_guard.testing import LocalProvider
from tests.support.api import create_from_text
from tests.support.browser import TIMEOUT_MS
from tests.support.paths import REPO

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

SCREENSHOT = REPO / "docs" / "review-page.png"
HOSTILE_IMG = "<img src=x onerror=alert(1)>"
HOSTILE_SCRIPT = "<script>window.pwned=1</script>"


@attrs.define
class Review:
    """A browser tab on one local provider, with what the page said behind our back."""

    page: Page
    provider: LocalProvider
    dialogs: list[str]
    console_errors: list[str]

    def open(self) -> None:
        """Sign in with the reviewer token and wait until the page has loaded its list."""
        self.page.goto(f"{self.provider.url}/?token={self.provider.reviewer_credential}")
        self.page.get_by_test_id("sign-in").click()  # the link alone signs nobody in
        self.page.wait_for_selector('[data-testid="live"][data-state="live"]', timeout=TIMEOUT_MS)

    def card(self, request_id: str) -> Any:
        return self.page.locator(f'[data-testid="request-{request_id}"]')


@pytest.fixture
def review(browser: Browser, provider: LocalProvider) -> Iterator[Review]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    dialogs: list[str] = []
    console_errors: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    yield Review(page=page, provider=provider, dialogs=dialogs, console_errors=console_errors)
    context.close()


def create(provider: LocalProvider, tool: str, arguments: dict[str, Any]) -> str:
    """Create a request directly over HTTP, as any adapter would; return its id."""
    response = requests.post(
        f"{provider.url}/v1/requests",
        json={"tool": tool, "arguments": arguments, "timeout": "30m"},
        headers={
            "Authorization": f"Bearer {provider.credential}",
            "Idempotency-Key": str(uuid.uuid4()),
        },
        timeout=5,
    )
    assert 201 == response.status_code, response.text
    request_id: str = response.json()["id"]
    return request_id


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Start ``call`` in a thread (the waiting agent); its result lands in the list."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(call()), daemon=True)
    thread.start()
    return thread, results


def refund_tool(provider: LocalProvider) -> Callable[..., Any]:
    guard = ag.Guard(base_url=provider.url, credential=provider.credential, poll_wait="5s")

    @guard.requires_approval(timeout="30m")
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        return {
            "payment_id": payment_id,
            "amount": amount,
            "currency": currency,
            "status": "refunded",
        }

    return issue_refund


# ----------------------------------------------------------------------------- tests


def test_login_page_asks_for_the_token_and_sets_a_strict_csp(review: Review) -> None:
    """Without a session ``/`` shows the token form, under the strict Content-Security-Policy."""
    response = review.page.goto(f"{review.provider.url}/")

    assert response is not None
    csp = response.headers.get("content-security-policy", "")
    assert "default-src 'none'" in csp
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert review.page.get_by_label("Reviewer token").is_visible()
    assert 0 == review.page.locator('[data-testid="pending-list"]').count()


def test_signing_in_with_the_form_shows_the_review_page(review: Review) -> None:
    """Typing the reviewer token into the login form leads to the review page."""
    review.page.goto(f"{review.provider.url}/")
    review.page.get_by_label("Reviewer token").fill(review.provider.reviewer_credential)
    review.page.get_by_test_id("sign-in").click()

    review.page.wait_for_selector('[data-testid="live"][data-state="live"]')
    assert "token=" not in review.page.url  # the redirect drops it from the address bar
    assert review.page.get_by_role("heading", name="Approval requests").is_visible()


def test_approving_in_the_browser_lets_the_waiting_call_run(review: Review) -> None:
    """A pending request shows with arguments and countdown; Approve makes the call run."""
    issue_refund = refund_tool(review.provider)
    thread, results = in_thread(lambda: issue_refund("payment_123", 4900))
    request = review.provider.next_request(timeout=5.0)

    review.open()
    card = review.card(request.id)
    card.wait_for()
    assert "issue_refund" == card.get_by_test_id("tool").text_content()
    assert '"payment_id": "payment_123"' in (card.get_by_test_id("arguments").text_content() or "")
    assert re.fullmatch(
        r"29m \d\ds left|30m 00s left", card.get_by_test_id("time-left").inner_text()
    )
    card.get_by_test_id("valid-for").select_option("15m")
    card.get_by_test_id("approve").click()

    thread.join(timeout=15)
    assert [
        {"payment_id": "payment_123", "amount": 4900, "currency": "GBP", "status": "refunded"}
    ] == (results)
    done = review.page.get_by_test_id("done-list").locator(f'[data-testid="request-{request.id}"]')
    done.wait_for()
    assert "approved" == done.get_attribute("data-status")
    assert [] == review.dialogs


def test_denying_with_a_note_returns_not_run_with_that_note(review: Review) -> None:
    """Deny with a note: the waiting call returns NotRun(DENIED) carrying the note."""
    issue_refund = refund_tool(review.provider)
    thread, results = in_thread(lambda: issue_refund("payment_456", 1200))
    request = review.provider.next_request(timeout=5.0)

    review.open()
    card = review.card(request.id)
    card.get_by_label("Note").fill("Refund already issued by phone.")
    card.get_by_test_id("deny").click()

    thread.join(timeout=15)
    [outcome] = results
    assert isinstance(outcome, ag.NotRun)
    assert (ag.Reason.DENIED, "Refund already issued by phone.") == (outcome.reason, outcome.note)
    done = review.page.get_by_test_id("done-list").locator(f'[data-testid="request-{request.id}"]')
    assert "Refund already issued by phone." == done.get_by_test_id("decision-note").text_content()


def test_deny_without_a_note_asks_for_one_and_sends_nothing(review: Review) -> None:
    """Deny with an empty note shows a message on the card; the request stays pending."""
    request_id = create(review.provider, "issue_refund", {"payment_id": "p", "amount": 1})

    review.open()
    card = review.card(request_id)
    card.get_by_test_id("deny").click()

    assert "Write a note" in (card.get_by_test_id("card-error").text_content() or "")
    assert "pending" == card.get_attribute("data-status")


def test_hostile_arguments_show_as_literal_text(review: Review) -> None:
    """HTML and script in a tool name or arguments is shown as text and never runs."""
    request_id = create(
        review.provider,
        f"evil{HOSTILE_IMG}",
        {"memo": HOSTILE_IMG, "html": HOSTILE_SCRIPT},
    )

    review.open()
    card = review.card(request_id)
    card.wait_for()
    arguments = card.get_by_test_id("arguments").text_content() or ""
    assert HOSTILE_IMG in arguments
    assert HOSTILE_SCRIPT in arguments
    assert f"evil{HOSTILE_IMG}" == card.get_by_test_id("tool").text_content()
    assert card.get_by_text(HOSTILE_SCRIPT, exact=False).first.is_visible()
    assert 0 == card.locator("img, script").count()
    review.page.wait_for_timeout(300)  # give a would-be onerror handler time to fire
    assert review.page.evaluate("window.pwned") is None
    assert [] == review.dialogs


def test_the_page_updates_by_itself_when_requests_arrive_and_change(review: Review) -> None:
    """A new request appears, and a decision made elsewhere moves it, without a reload."""
    review.open()
    assert review.page.get_by_test_id("pending-empty").is_visible()
    review.page.evaluate("window.__sameDocument = true")

    request_id = create(review.provider, "rotate_keys", {"service": "billing"})
    card = review.page.get_by_test_id("pending-list").locator(
        f'[data-testid="request-{request_id}"]'
    )
    card.wait_for()
    assert "1" == review.page.get_by_test_id("pending-count").text_content()

    review.provider.deny(request_id, "Not during the freeze.")
    done = review.page.get_by_test_id("done-list").locator(f'[data-testid="request-{request_id}"]')
    done.wait_for()
    # The pending list is redrawn in the same update, not necessarily the same frame.
    review.page.get_by_test_id("pending-empty").wait_for(state="visible")
    assert review.page.evaluate("window.__sameDocument") is True  # never reloaded


def test_api_refuses_the_session_cookie_without_the_csrf_header(review: Review) -> None:
    """A same-browser request with the cookie but no X-CSRF-Token is refused (CSRF guard)."""
    request_id = create(review.provider, "issue_refund", {"payment_id": "p", "amount": 1})
    review.open()

    status = review.page.evaluate(
        """async (id) => (await fetch(`/v1/requests/${id}/decision`, {
            method: "POST", headers: {"Content-Type": "application/json"},
            body: JSON.stringify({status: "approved", note: null, valid_for: "5m"}),
        })).status""",
        request_id,
    )

    assert status in (401, 403)
    assert "pending" == review.card(request_id).get_attribute("data-status")


def test_the_page_runs_without_csp_violations(review: Review) -> None:
    """Nothing on the page needs an inline script or style: the console has no CSP errors."""
    create(review.provider, "issue_refund", {"payment_id": "p", "amount": 1})
    review.open()
    review.page.get_by_test_id("approve").first.wait_for()

    assert [] == [m for m in review.console_errors if "Content Security Policy" in m]


def test_screenshot_of_the_review_page(review: Review, tmp_path: Path) -> None:
    """Screenshot one pending refund and one denied request (docs/review-page.png on request)."""
    earlier = create(review.provider, "delete_user", {"user_id": "u_4821", "hard_delete": True})
    review.provider.deny(earlier, "Deletion needs a ticket from the account owner.")
    request_id = create(
        review.provider,
        "issue_refund",
        {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"},
    )

    review.open()
    review.card(request_id).wait_for()
    review.card(earlier).wait_for()
    # The README's picture changes only on purpose: APPROVAL_GUARD_RECORD_RESULTS=1.
    record = os.environ.get("APPROVAL_GUARD_RECORD_RESULTS") == "1"
    target = SCREENSHOT if record else tmp_path / "review-page.png"
    target.parent.mkdir(exist_ok=True)
    review.page.screenshot(path=str(target), full_page=True)

    assert target.stat().st_size > 10_000


def test_an_unreachable_provider_shows_an_error_line(review: Review) -> None:
    """When the provider stops answering, the page says so instead of going quietly stale."""
    review.open()

    review.provider.stop()

    error = review.page.get_by_test_id("error")
    error.wait_for()
    assert "not answering" in (error.text_content() or "")
    assert "offline" == review.page.get_by_test_id("live").get_attribute("data-state")


# ----------------------------------------------------------------------------- what is shown

EXACT = {
    "big": "9007199254740993",
    "long": "7" * 400,
    "huge": "1e400",
    "sum": "0.30000000000000004",
    "minus_zero": "-0",
    "tiny": "0.1000000000000000055511151231257827",
    "upper": "1E5",
}


def create_raw(provider: LocalProvider, tool: str, arguments_json: str) -> str:
    """Create a request from JSON text (for numbers Python cannot write); return its id."""
    body = f'{{"tool":{json.dumps(tool)},"arguments":{arguments_json},"timeout":"30m"}}'
    request_id = create_from_text(provider, body)
    return request_id


def close_many(provider: LocalProvider, n: int) -> None:
    """Make ``n`` cancelled requests straight in the store (fast), newest last."""
    store = provider.store
    owner = store.authenticate(provider.credential)
    assert owner is not None
    for i in range(n):
        created = store.create_request(
            owner=owner,
            idempotency_key=f"bulk-{i}",
            tool="noop",
            arguments={"i": i},
            timeout_seconds=1800,
        )
        store.cancel(created.request.id, owner=owner, reason=None)


def test_numbers_are_shown_exactly_as_sent(review: Review) -> None:
    """Big, long and odd numbers show as sent, on a live-added card and once it is closed."""
    review.open()
    arguments_json = "{" + ",".join(f'"{k}":{v}' for k, v in EXACT.items()) + "}"

    request_id = create_raw(review.provider, "transfer", arguments_json)
    card = review.page.get_by_test_id("pending-list").locator(
        f'[data-testid="request-{request_id}"]'
    )
    card.wait_for()
    pending_text = card.get_by_test_id("arguments").text_content() or ""
    review.provider.deny(request_id, "no")
    done = review.page.get_by_test_id("done-list").locator(f'[data-testid="request-{request_id}"]')
    done.wait_for()
    done_text = done.get_by_test_id("arguments").text_content() or ""

    for text in (pending_text, done_text):  # the provider keeps keys sorted
        assert [f'"{k}": {v}' for k, v in sorted(EXACT.items())] == [
            line.strip().rstrip(",") for line in text.splitlines()[1:-1]
        ]


def test_hidden_characters_are_shown_escaped(review: Review) -> None:
    """Bidi overrides and invisible characters show as \\u escapes in every text on the page."""
    provider = review.provider
    tool = "refund\u202e"
    arguments = {"iban\u200b": "GB12\u2066ABCD\u2069", "memo": "a\ufeffb\u061c\u200ec"}
    pending_id = create(provider, tool, arguments)
    denied_id = create(provider, "delete_user", {"user_id": "u\u2060"})
    alice = provider.store.create_credential("reviewer", "ali\u202ece")
    reviewer = provider.store.authenticate(alice)
    assert reviewer is not None
    provider.store.decide(denied_id, reviewer=reviewer, status="denied", note="not \u202eyet")
    cancelled_id = create(provider, "rotate_keys", {"service": "billing"})
    requests.post(
        f"{provider.url}/v1/requests/{cancelled_id}/cancel",
        json={"reason": "agent \u200dstopped"},
        headers={"Authorization": f"Bearer {provider.credential}"},
        timeout=5,
    ).raise_for_status()

    review.open()
    pending = review.card(pending_id)
    denied = review.card(denied_id)
    cancelled = review.card(cancelled_id)
    pending.wait_for()
    denied.wait_for()
    cancelled.wait_for()

    assert "refund\\u202e" == pending.get_by_test_id("tool").text_content()
    assert (
        '{\n  "iban\\u200b": "GB12\\u2066ABCD\\u2069",\n  "memo": "a\\ufeffb\\u061c\\u200ec"\n}'
        == pending.get_by_test_id("arguments").text_content()
    )
    assert "not \\u202eyet" == denied.get_by_test_id("decision-note").text_content()
    assert "by ali\\u202ece" in (denied.get_by_test_id("outcome").text_content() or "")
    assert '"u\\u2060"' in (denied.get_by_test_id("arguments").text_content() or "")
    assert "agent \\u200dstopped" == cancelled.get_by_test_id("cancel-reason").text_content()
    page_text = review.page.locator("body").text_content() or ""
    hidden = "\u202e\u200b\u2066\u2069\ufeff\u061c\u200e\u2060\u200d"
    assert [] == [char for char in page_text if char in hidden]


def test_an_old_pending_request_is_listed_behind_many_closed_ones(review: Review) -> None:
    """Over 1,000 newer closed requests do not hide an older pending one; older closed page in."""
    from playwright.sync_api import expect

    pending_id = create(review.provider, "issue_refund", {"payment_id": "p_old", "amount": 1})
    close_many(review.provider, 1001)

    review.open()

    review.card(pending_id).wait_for()
    assert "1" == review.page.get_by_test_id("pending-count").text_content()
    done = review.page.get_by_test_id("done-list").locator("li")
    assert 50 == done.count()
    review.page.get_by_test_id("done-more").click()
    expect(done).to_have_count(100)


def test_pending_requests_over_several_list_pages_are_all_listed(review: Review) -> None:
    """The page follows next_before to the end: with two requests a page, all five show."""
    from playwright.sync_api import expect

    ids = [create(review.provider, "noop", {"i": i}) for i in range(5)]

    def two_a_page(route: Any) -> None:
        route.continue_(url=re.sub(r"limit=\d+", "limit=2", route.request.url))

    review.page.route("**/v1/requests?*", two_a_page)
    review.open()

    cards = review.page.get_by_test_id("pending-list").locator("li")
    expect(cards).to_have_count(5)
    assert [f"request-{i}" for i in reversed(ids)] == [
        cards.nth(n).get_attribute("data-testid") for n in range(5)
    ]
    assert "5" == review.page.get_by_test_id("pending-count").text_content()


def test_a_request_without_its_display_form_cannot_be_approved(review: Review) -> None:
    """If the list lacks the display form, the page shows nothing of it and Approve is off."""
    request_id = create(review.provider, "issue_refund", {"payment_id": "p", "amount": 1})

    def strip_display(route: Any) -> None:
        response = route.fetch()
        data = response.json()
        for request in data.get("requests", []):
            request.pop("display", None)
        route.fulfill(response=response, json=data)

    review.page.route("**/v1/requests?*", strip_display)
    review.open()
    card = review.card(request_id)
    card.wait_for()

    assert card.get_by_test_id("approve").is_disabled()
    assert "not shown" in (card.get_by_test_id("arguments").text_content() or "")
    assert '"payment_id"' not in (card.text_content() or "")


def _left_of(locator: Any, needle: str) -> float:
    """Where on screen the first character of ``needle`` inside the element is drawn."""
    left: float = locator.evaluate(
        """(node, needle) => {
            const text = node.firstChild;
            const at = node.textContent.indexOf(needle);
            const range = document.createRange();
            range.setStart(text, at);
            range.setEnd(text, at + 1);
            return range.getBoundingClientRect().left;
        }""",
        needle,
    )
    return left


def test_right_to_left_letters_cannot_reorder_what_is_shown(review: Review) -> None:
    """Hebrew or Arabic letters beside digits do not swap them on screen: logical order shows."""
    request_id = create(
        review.provider, "pay_\u05d0_111_222", {"iban": "\u05d0 333 444", "memo": "\u0627 555-666"}
    )
    review.provider.deny(request_id, "\u05d0 777 888")
    review.open()
    card = review.card(request_id)
    card.wait_for()
    card.locator("details.args-details").evaluate("details => { details.open = true; }")

    for test_id, first, second in [
        ("tool", "111", "222"),
        ("arguments", "333", "444"),
        ("arguments", "555", "666"),
        ("decision-note", "777", "888"),
    ]:
        shown = card.get_by_test_id(test_id)
        assert _left_of(shown, first) < _left_of(shown, second), (test_id, first)
