"""A review-page tab in the headless browser, for the tests in ``tests/browser/``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from approval_guard.testing import LocalProvider

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

#: How long the page may take to show what a test waits for.
TIMEOUT_MS = 5_000


@attrs.define
class Review:
    """A browser tab on one local provider, with the console errors the page logged."""

    page: Page
    provider: LocalProvider
    console_errors: list[str]

    def open(self) -> None:
        """Sign in with the reviewer token and wait until the page has loaded its list."""
        self.page.goto(f"{self.provider.url}/?token={self.provider.reviewer_credential}")
        self.page.get_by_test_id("sign-in").click()  # the link alone signs nobody in
        self.page.wait_for_selector('[data-testid="live"][data-state="live"]', timeout=TIMEOUT_MS)

    def pending(self, request_id: str) -> Locator:
        return self.page.get_by_test_id("pending-list").locator(
            f'[data-testid="request-{request_id}"]'
        )

    def done(self, request_id: str) -> Locator:
        return self.page.get_by_test_id("done-list").locator(
            f'[data-testid="request-{request_id}"]'
        )


def edit_field(card: Locator, name: str) -> Locator:
    return card.locator(f'[data-testid="edit"][data-name="{name}"]')
