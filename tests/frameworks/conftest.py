"""Fixtures of the framework tests: a Guard whose harness allows only a few seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider
from tests.support.frameworks import close_loop_left_by_run_sync


@pytest.fixture
def short_guard(provider: LocalProvider) -> Iterator[ag.Guard]:
    """A Guard whose harness allows 4 s, so a request nobody decides ends in about 2 s."""
    made = ag.Guard(
        base_url=provider.url,
        credential=provider.credential,
        harness_limit="4s",
        return_margin="1s",
        deadline_margin="1s",
        poll_wait="1s",
    )
    yield made
    made.close()


@pytest.fixture(autouse=True)
def _no_event_loop_left_open() -> Iterator[None]:
    yield
    close_loop_left_by_run_sync()
