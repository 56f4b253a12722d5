"""Shared fixtures for the core's unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

import approval_guard as ag
from tests.fakes import BASE, FakeProvider, ManualClock

SECRET = "agi_secret_token_never_shown_123"


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
    return ag.Guard(
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
