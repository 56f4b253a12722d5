"""The demo as a new user meets it: approve in a real browser, and the page sees the end.

The demo's provider exits with the outcome; before it does, an open review page
must have shown the decision and that the demo has finished, not "Offline".
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from tests.support.cli import subprocess_env

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000


def _browser_link(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    end = time.monotonic() + 30
    while time.monotonic() < end:
        line = process.stdout.readline()
        if not line:
            break
        found = re.search(r"in a browser:\s+(\S+)", line)
        if found:
            return found.group(1)
    process.kill()
    raise AssertionError("the demo never printed its review link")


def test_approving_in_the_browser_during_the_demo_shows_the_end_not_offline(
    browser: Browser,
) -> None:
    demo = subprocess.Popen(
        [sys.executable, "-m", "approval_guard", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(_browser_link(demo))
        page.get_by_test_id("sign-in").click()  # the link alone signs nobody in
        card = page.get_by_test_id("pending-list").locator("li").first
        card.get_by_test_id("approve").click()

        done = page.get_by_test_id("done-list").locator('[data-status="approved"]')
        done.wait_for()
        notice = page.get_by_test_id("notice")
        notice.wait_for(state="visible")
        assert "The demo has finished" in (notice.text_content() or "")
        # Only now may the demo exit, and the page then says so, not "Offline".
        assert 0 == demo.wait(timeout=20)
        page.wait_for_selector('[data-testid="live"][data-state="finished"]')
        assert "Offline" not in (page.get_by_test_id("live").text_content() or "")
        assert (
            [] == page.get_by_test_id("error").all_inner_texts()
            or not page.get_by_test_id("error").is_visible()
        )
    finally:
        context.close()
        if demo.poll() is None:
            demo.kill()
        out, err = demo.communicate(timeout=10)
    assert "Outcome: approved, and issue_refund ran." in out, out + err


def test_a_terminal_decision_does_not_keep_the_demo_waiting() -> None:
    """Nobody opened the page: the demo exits with the outcome at once."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "approval_guard", "demo", "--decide", "approve", "--after", "0s"],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(),
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert time.monotonic() - started < 10


def test_the_demo_page_offers_a_grant_and_the_demo_shows_the_repeat_covered(
    browser: Browser,
) -> None:
    """Approve with a standing grant in the demo: its repeated call is approved by the grant."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "approval_guard", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(_browser_link(demo))
        page.get_by_test_id("sign-in").click()  # the link alone signs nobody in
        card = page.get_by_test_id("pending-list").locator("li").first
        card.get_by_test_id("grant-offer-toggle").click()
        card.get_by_test_id("approve-grant").click()

        repeat = (
            page.get_by_test_id("done-list")
            .get_by_test_id("outcome")
            .filter(has_text="Approved by grant grant_")
        )
        repeat.wait_for()
        assert " of reviewer at " in repeat.inner_text()
        page.get_by_test_id("notice").wait_for(state="visible")
        assert 0 == demo.wait(timeout=20)
    finally:
        context.close()
        if demo.poll() is None:
            demo.kill()
        out, err = demo.communicate(timeout=10)
    assert "Outcome of the repeat: approved by grant grant_" in out, out + err
