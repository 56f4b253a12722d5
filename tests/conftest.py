"""Fixtures for every test directory: the local provider and its clients, the fake provider.

The browser is in ``tests/browser/conftest.py``, the ledger backends in
``tests/ledger/conftest.py``; helpers without fixtures are in ``tests/support/``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after
from tests.support.api import Api
from tests.support.fakes import BASE, SECRET, FakeProvider, ManualClock

# Fixture modules for every directory: a PostgreSQL server (``pg_dsn``,
# ``pg_schema_dsn``), provider processes on a database of their own (``fleet``),
# scripted HTTP servers (``servers``) and a hostile provider (``hostile``).
pytest_plugins = [
    "tests.support.pg",
    "tests.support.fleet",
    "tests.support.scripted",
    "tests.support.hostile",
]


# -- the local provider, over real HTTP on 127.0.0.1 ---------------------------------


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
def api(provider: LocalProvider) -> Api:
    """The instance credential's client."""
    return Api(provider.url, provider.credential)


@pytest.fixture
def reviewer(provider: LocalProvider) -> Api:
    """The reviewer credential's client."""
    return Api(provider.url, provider.reviewer_credential)


# -- the fake provider, behind ``responses`` on a manual clock -------------------------


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
