"""Fixtures of the ntfy tests: a fake ntfy, and a provider pushing to it on SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from approval_guard.provider import PostgresStore, Store, StoreProtocol
from tests.support.fake_ntfy import FakeNtfy
from tests.support.mail_team import Clock
from tests.support.ntfy_team import NtfyTeam, start_ntfy_team


@pytest.fixture
def ntfy() -> Iterator[FakeNtfy]:
    """A fake ntfy server on 127.0.0.1 that wants the test token."""
    with FakeNtfy() as fake:
        yield fake


#: PostgreSQL in the slow run (``.ci/run`` runs both): the default run stays near three minutes.
@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StoreProtocol, Clock]]:
    """``(store, clock)``: a SQLite file, or a PostgreSQL schema, on a clock tests move on."""
    clock = Clock()
    opened: StoreProtocol
    if request.param == "postgres":
        opened = PostgresStore(request.getfixturevalue("pg_schema_dsn"), clock=clock)
    else:
        opened = Store(str(tmp_path / "approvals.sqlite3"), clock=clock)
    try:
        yield opened, clock
    finally:
        opened.close()


@pytest.fixture
def team(store: tuple[StoreProtocol, Clock], ntfy: FakeNtfy) -> Iterator[NtfyTeam]:
    """A provider pushing to alice's and bob's (payments) and carol's (ops) topics."""
    opened, clock = store
    started = start_ntfy_team(opened, ntfy, clock)
    try:
        yield started
    finally:
        started.server.close()
