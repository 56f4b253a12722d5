"""The review page in Chromium behind a reverse proxy that serves the provider under a path."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from approval_guard.provider import ProviderServer
from tests.support.api import Api, wait_for
from tests.support.browser import TIMEOUT_MS
from tests.support.prefix_proxy import prefix_proxy

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser


def test_the_page_signs_in_lists_and_decides_under_a_path_prefix(
    browser: Browser, tmp_path: Path
) -> None:
    """At /approvals/: sign-in, files, the live list and an approval all go through the proxy."""
    with (
        prefix_proxy("/approvals") as proxy,
        ProviderServer(str(tmp_path / "a.db"), public_url=proxy.base) as server,
    ):
        proxy.upstream = server.url
        tokens = server.first_start_tokens
        assert tokens is not None
        created = Api(server.url, tokens.instance).new(tool="issue_refund")
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{proxy.base}/?token={tokens.reviewer}&request={created['id']}")
            page.get_by_test_id("sign-in").click()
            page.wait_for_selector('[data-testid="live"][data-state="live"]')
            card = page.locator(f'[data-testid="request-{created["id"]}"]')
            card.get_by_test_id("approve").click()
            reviewer = Api(server.url, tokens.reviewer)
            wait_for(
                lambda: reviewer.poll(created["id"]).json()["status"],
                lambda status: "approved" == status,
                what="the page's approval never reached the provider",
            )
            assert page.url.startswith(f"{proxy.base}/")
            assert [] == errors
        finally:
            context.close()
    paths = [path for _, path, _ in proxy.seen]
    assert any(path.startswith("/approvals/static/review.js") for path in paths)
    assert any(path.startswith("/approvals/v1/events") for path in paths)
    assert [] == [seen for seen in proxy.seen if seen[2] == 404]
