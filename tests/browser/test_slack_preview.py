"""The Slack message preview in a real headless Chromium: every block visible; the docs' picture."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from approval_guard.provider.channels.slack.preview import preview_html, sample_message
from tests.support.paths import REPO

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser


def test_chromium_shows_every_block_and_takes_the_docs_picture(
    browser: Browser, tmp_path: Path
) -> None:
    """Each block is visible with its text; the screenshot is docs/slack-message.png."""
    body = sample_message()
    page = browser.new_page(viewport={"width": 700, "height": 400})
    try:
        page.set_content(preview_html(body))
        blocks = page.locator("[data-block]")
        assert len(body["blocks"]) == blocks.count()
        for n in range(blocks.count()):
            one = blocks.nth(n)
            assert one.is_visible()
            assert one.bounding_box() is not None and one.inner_text().strip()
        assert [
            "Approve",
            "Deny\u2026",
            "Approve and allow for 1h\u2026",
        ] == page.locator("[data-action]").all_inner_texts()
        record = os.environ.get("APPROVAL_GUARD_RECORD_RESULTS") == "1"
        target = REPO / "docs" / "slack-message.png" if record else tmp_path / "slack.png"
        page.locator(".msg").screenshot(path=str(target))
        assert target.stat().st_size > 1000
    finally:
        page.close()
