"""API 1.3 on the review page in Chromium: the agent's words shown inert, a batch's Approve all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from approval_guard.testing import LocalProvider
from tests.support.browser import TIMEOUT_MS, Review
from tests.support.cli import create

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Route

pytestmark = pytest.mark.browser

HOSTILE = (
    '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    "<a href='javascript:window.pwned=3'>approve</a> \u202eevil\nsecond line"
)


@pytest.fixture
def review(browser: Browser, provider: LocalProvider) -> Iterator[Review]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    console_errors: list[str] = []
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    yield Review(page=page, provider=provider, console_errors=console_errors)
    context.close()


def test_the_agents_words_are_shown_as_text_above_the_arguments(review: Review) -> None:
    """Labelled "The agent says:", markup shown as text, nothing run, the bidi mark escaped."""
    request_id = create(review.provider, context=HOSTILE)
    review.open()
    card = review.pending(request_id)
    said = card.get_by_test_id("context")
    said.wait_for()
    assert "The agent says:" in (said.text_content() or "")
    text = card.get_by_test_id("context-text").inner_text()
    assert "<script>window.pwned=1</script>" in text
    assert "\u202e" not in text and "\\u202e" in text
    assert "second line" in text
    assert 0 == card.locator("script, img, a[href^='javascript']").count()
    assert review.page.evaluate("window.pwned === undefined")
    box_said = said.bounding_box()
    box_args = card.get_by_test_id("arguments").bounding_box()
    assert box_said is not None and box_args is not None
    assert box_said["y"] < box_args["y"]
    assert [] == review.console_errors


def test_a_very_long_reason_is_shown_whole_and_inert(review: Review) -> None:
    """1,000 characters of markup are shown as text, all of them."""
    request_id = create(review.provider, context="<b>x</b>" * 125)
    review.open()
    text = review.pending(request_id).get_by_test_id("context-text").inner_text()
    assert "<b>x</b>" * 125 == text


def test_a_request_without_a_reason_shows_no_such_section(review: Review) -> None:
    """A 1.2 request's card has no "The agent says:"."""
    request_id = create(review.provider)
    review.open()
    review.pending(request_id).get_by_test_id("arguments").wait_for()
    assert 0 == review.pending(request_id).get_by_test_id("context").count()


def _bar(review: Review) -> Any:
    return review.page.get_by_test_id("batch")


def test_approve_all_posts_exactly_the_ids_shown_and_not_one_that_joined_later(
    review: Review,
) -> None:
    """The bar says 'Approve all 3'; a 4th made as the click leaves is not decided."""
    provider = review.provider
    ids = [create(provider, batch="turn-7") for _ in range(3)]
    lonely = create(provider, batch="turn-8")
    review.open()
    bar = _bar(review)
    bar.get_by_test_id("approve-all").wait_for()
    assert "Approve all 3" == bar.get_by_test_id("approve-all").inner_text()
    assert 1 == review.page.get_by_test_id("batch").count()  # turn-8 has one: no bar
    sent: list[Any] = []
    joined: list[str] = []

    def handle(route: Route) -> None:
        sent.append(json.loads(route.request.post_data or "{}"))
        joined.append(create(provider, batch="turn-7"))  # joins after the reviewer looked
        route.continue_()

    review.page.route("**/v1/decisions", handle)
    bar.get_by_test_id("approve-all").click()
    review.page.wait_for_function(
        'ids => ids.every(id => !document.querySelector(`#pending [data-testid="request-${id}"]`))',
        arg=ids,
        timeout=TIMEOUT_MS,
    )
    (body,) = sent
    assert sorted(ids) == sorted(body["ids"]) and "approved" == body["status"]
    assert ["approved"] * 3 == [provider.get(one).status for one in ids]
    assert "pending" == provider.get(joined[0]).status
    assert "pending" == provider.get(lonely).status
    assert [] == review.console_errors


def test_a_refused_id_is_reported_and_the_others_are_decided(review: Review) -> None:
    """One of the batch decided elsewhere meanwhile: its line says why; the other is approved."""
    provider = review.provider
    first, second = create(provider, batch="t"), create(provider, batch="t")
    review.open()
    bar = _bar(review)
    assert "Approve all 2" == bar.get_by_test_id("approve-all").inner_text()

    def handle(route: Route) -> None:
        provider.deny(first, "decided elsewhere")
        route.continue_()

    review.page.route("**/v1/decisions", handle)
    bar.get_by_test_id("approve-all").click()
    outcome = review.page.get_by_test_id("batch-outcome")
    outcome.get_by_test_id("batch-result").wait_for()
    assert "1 of 2 not decided" in outcome.inner_text()
    (line,) = outcome.get_by_test_id("batch-result").all_inner_texts()
    assert first in line and "not pending" in line
    assert ("denied", "approved") == (provider.get(first).status, provider.get(second).status)


def test_deny_all_needs_a_note_then_denies_each_with_it(review: Review) -> None:
    """Without a note nothing is sent; with one, both are denied with it."""
    provider = review.provider
    ids = [create(provider, batch="t") for _ in range(2)]
    review.open()
    bar = _bar(review)
    bar.get_by_test_id("deny-all").click()
    assert bar.get_by_test_id("batch-error").is_visible()
    assert ["pending", "pending"] == [provider.get(one).status for one in ids]
    bar.get_by_test_id("batch-note").fill("not this turn")
    bar.get_by_test_id("deny-all").click()
    review.page.get_by_test_id("pending-empty").wait_for(state="visible")
    for one in ids:
        decision = provider.get(one).decision
        assert decision is not None and ("denied", "not this turn") == (
            decision.status,
            decision.note,
        )


def test_a_request_the_page_cannot_show_is_never_in_approve_all(review: Review) -> None:
    """A batch member without its display form stands alone; the bar offers the two shown."""
    provider = review.provider
    ids = [create(provider, batch="t") for _ in range(3)]

    def strip_one(route: Route) -> None:
        answer = route.fetch()
        body = answer.json()
        for item in body.get("requests", []):
            if item.get("id") == ids[0]:
                del item["display"]
        route.fulfill(response=answer, json=body)

    review.page.route("**/v1/requests?status=pending*", strip_one)
    review.open()
    bar = _bar(review)
    assert "Approve all 2" == bar.get_by_test_id("approve-all").inner_text()
    assert sorted(ids[1:]) == sorted((bar.get_attribute("data-ids") or "").split(","))
    bar.get_by_test_id("approve-all").click()
    review.page.wait_for_function(
        'id => !document.querySelector(`#pending [data-testid="request-${id}"]`)',
        arg=ids[1],
        timeout=TIMEOUT_MS,
    )
    assert ["pending", "approved", "approved"] == [provider.get(one).status for one in ids]
