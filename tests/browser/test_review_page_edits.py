"""The review page's editable arguments and redacted values (API 1.1), in a headless browser.

Debian's chromium driven by Playwright, as in tests/browser/test_review_page.py: without
playwright or chromium these tests skip on a developer's machine, and fail when
``CI`` is set.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from approval_guard._codec.display import markers_at
from approval_guard.testing import LocalProvider
from tests.support.api import create_from_text
from tests.support.browser import TIMEOUT_MS, Review, edit_field

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser

REFUND_JSON = '{"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}'
SHOWN_MARKER = "\u2039redacted 1a2b3c4d5e6f\u203a"


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


def create(
    provider: LocalProvider,
    arguments_json: str,
    editable: list[str],
    redacted: list[str] | None = None,
) -> str:
    """Create a request from JSON text (exact numbers) with these editable names; its id.

    ``redacted`` (API 1.3): where the markers are, as a guard says; None: every marker.
    """
    if redacted is None:
        redacted = markers_at(json.loads(arguments_json))
    body = (
        f'{{"tool": "issue_refund", "arguments": {arguments_json}, "timeout": "30m", '
        f'"editable": {json.dumps(editable)}, "redacted": {json.dumps(redacted)}}}'
    )
    request_id = create_from_text(provider, body)
    return request_id


def stored_edit(provider: LocalProvider, request_id: str) -> dict[str, Any] | None:
    decision = provider.get(request_id).decision
    assert decision is not None
    return decision.arguments


# ----------------------------------------------------------------------------- tests


def test_a_reviewer_edits_an_argument_and_the_exact_new_value_is_stored(review: Review) -> None:
    """Type 9007199254740993 into the amount input and approve: stored exactly, shown as changed."""
    request_id = create(review.provider, REFUND_JSON, ["amount"])
    review.open()
    card = review.pending(request_id)

    field = edit_field(card, "amount")
    assert "4900" == field.input_value()
    field.fill("9007199254740993")
    assert card.get_by_test_id("edit-changed").is_visible()
    card.get_by_test_id("approve").click()

    done = review.done(request_id)
    done.wait_for()
    assert {
        "payment_id": "payment_123",
        "amount": 9007199254740993,
        "currency": "GBP",
    } == stored_edit(review.provider, request_id)
    assert "Approved with changes" in (done.get_by_test_id("outcome").text_content() or "")
    change = done.get_by_test_id("change")
    assert ("amount", "4900", "9007199254740993") == (
        change.get_by_test_id("change-name").text_content(),
        change.get_by_test_id("change-before").text_content(),
        change.get_by_test_id("change-after").text_content(),
    )
    assert [] == review.console_errors


def test_only_editable_arguments_are_inputs(review: Review) -> None:
    """The read-only arguments have no input; the full arguments show as requested."""
    request_id = create(review.provider, REFUND_JSON, ["currency"])
    review.open()
    card = review.pending(request_id)
    card.wait_for()

    assert ["currency"] == [
        field.get_attribute("data-name") for field in card.get_by_test_id("edit").all()
    ]
    assert 2 == card.locator("textarea, input").count()  # the currency and the note
    assert '"payment_id": "payment_123"' in (card.get_by_test_id("arguments").text_content() or "")
    assert "true" != card.get_by_test_id("arguments").get_attribute("contenteditable")


def test_an_exact_number_is_prefilled_exactly_and_approving_unchanged_is_no_edit(
    review: Review,
) -> None:
    """An editable 9007199254740993 shows as typed, and approving untouched sends no edit."""
    arguments = '{"payment_id": "p", "amount": 9007199254740993, "ratio": 1e400}'
    request_id = create(review.provider, arguments, ["amount", "ratio"])
    review.open()
    card = review.pending(request_id)

    assert "9007199254740993" == edit_field(card, "amount").input_value()
    assert "1e400" == edit_field(card, "ratio").input_value()
    card.get_by_test_id("approve").click()

    review.done(request_id).wait_for()
    assert stored_edit(review.provider, request_id) is None


def test_edit_text_that_is_not_json_shows_why_and_decides_nothing(review: Review) -> None:
    """Typing EUR without quotes: the card says it is not JSON; the request stays pending."""
    request_id = create(review.provider, REFUND_JSON, ["currency"])
    review.open()
    card = review.pending(request_id)

    edit_field(card, "currency").fill("EUR")
    card.get_by_test_id("approve").click()

    error = card.get_by_test_id("card-error")
    error.wait_for()
    assert "not JSON" in (error.text_content() or "")
    assert "pending" == review.provider.get(request_id).status
    edit_field(card, "currency").fill('"EUR"')
    card.get_by_test_id("approve").click()
    review.done(request_id).wait_for()
    assert "EUR" == (stored_edit(review.provider, request_id) or {})["currency"]


def test_a_redacted_value_is_shown_redacted_and_never_editable(review: Review) -> None:
    """A listed marker shows as "redacted", is named in a notice, has no input; others as JSON."""
    arguments = (
        '{"api_key": {"$redacted": "1a2b3c4d5e6f"}, "card": {"number": '
        '{"$redacted": "00ff00ff00ff"}}, "amount": 4900, "memo": {"$redacted": "0123456789ab"}}'
    )
    request_id = create(review.provider, arguments, ["amount"], ["/api_key", "/card/number"])
    review.open()
    card = review.pending(request_id)
    card.wait_for()

    shown = card.get_by_test_id("arguments").text_content() or ""
    assert f'"api_key": {SHOWN_MARKER}' in shown
    assert '"number": \u2039redacted 00ff00ff00ff\u203a' in shown
    assert '"$redacted"' in shown and "redacted 0123456789ab" not in shown  # memo, as sent
    notice = card.get_by_test_id("redacted").text_content() or ""
    assert "Redacted" in notice
    assert "api_key, card.number" in notice
    assert ["amount"] == [f.get_attribute("data-name") for f in card.get_by_test_id("edit").all()]


def test_arguments_named_like_javascript_internals_are_edited_like_any_other(
    review: Review,
) -> None:
    """Editable "__proto__" and "constructor" are sent as keys, not lost to the prototype."""
    request_id = create(
        review.provider, '{"__proto__": 1, "constructor": 2}', ["__proto__", "constructor"]
    )
    review.open()
    card = review.pending(request_id)

    edit_field(card, "__proto__").fill("10")
    edit_field(card, "constructor").fill("20")
    card.get_by_test_id("approve").click()

    review.done(request_id).wait_for()
    assert {"__proto__": 10, "constructor": 20} == stored_edit(review.provider, request_id)
