"""Fixtures for the provider's own tests: the server without the testing wrapper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from approval_guard.provider import ProviderServer
from tests.support.databases import SharedDatabase


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    """A ProviderServer in memory, keep-alive 1 s and client timeout 2 s (no testing wrapper)."""
    with ProviderServer(":memory:", keep_alive_seconds=1, client_timeout_seconds=2) as running:
        yield running


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> SharedDatabase:
    """A database for several instances, once on each backend (SQLite and PostgreSQL)."""
    if request.param == "postgres":
        return SharedDatabase("postgres", request.getfixturevalue("pg_schema_dsn"))
    return SharedDatabase("sqlite", str(tmp_path / "shared.sqlite3"))
