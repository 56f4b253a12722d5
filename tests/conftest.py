"""Shared fixtures for the core's unit tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import responses

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after
from tests.support.fakes import BASE, SECRET, FakeProvider, ManualClock

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# Fixtures for every directory: a PostgreSQL server (``pg_dsn``, ``pg_schema_dsn``) and
# provider processes on a database of their own (``fleet``).
pytest_plugins = ["tests.support.pg", "tests.support.fleet"]

@pytest.fixture
def provider(approval_provider: LocalProvider) -> LocalProvider:
    """The local provider of a test: the pytest plugin's ``approval_provider``.

    In memory, on 127.0.0.1, stopped after the test; the plugin's ``guard`` points
    at it. A test that needs another one (a file, a clock offset, a poll cap,
    rules) builds its own ``LocalProvider(...)`` where it is used.
    """
    return approval_provider


@pytest.fixture
def approving(provider: LocalProvider) -> LocalProvider:
    """``provider`` with a reviewer who approves each new request 0.05 s after it is made."""
    provider.policy = approve_after(0.05)
    return provider


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake(clock: ManualClock) -> Iterator[FakeProvider]:
    provider = FakeProvider(clock)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        provider.install(rsps)
        yield provider


@pytest.fixture
def unit_guard(fake: FakeProvider, clock: ManualClock) -> ag.Guard:
    """A Guard on the fake provider and the manual clock."""
    guard = ag.Guard(
        base_url=BASE,
        credential=SECRET,
        harness_limit="35m",
        poll_wait="30s",
        return_margin="5s",
        deadline_margin="5s",
        clock=clock,
        # Its own record: the fake provider hands out the same ids in every test.
        ledger=ag.MemoryLedger(),
    )
    fake.attach_async(guard)
    return guard


# The real headless browser of the review-page tests (Debian's chromium).
CHROMIUM = os.environ.get("APPROVAL_GUARD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install 'approval-guard[browser]'"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no chromium at {CHROMIUM}: apt-get install chromium"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests cannot run in CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
