"""Fixtures for the execution-record tests: every ledger backend, and worker processes.

The helpers are in ``tests/support/ledger.py``; the PostgreSQL server (fixture
``pg_dsn``) comes from ``tests/support/pg.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from approval_guard._ledger.memory import MemoryLedger
from approval_guard._ledger.protocol import Ledger
from tests.support.ledger import Backend, Workers, postgres_backend, sqlite_backend

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]
DURABLE_BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each ledger backend in turn: memory, SQLite, PostgreSQL."""
    if request.param == "memory":
        memory = MemoryLedger()
        yield Backend("memory", memory, {"kind": "memory"}, lambda: memory)
    elif request.param == "sqlite":
        yield from sqlite_backend(tmp_path)
    else:
        yield from postgres_backend(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def ledger(backend: Backend) -> Ledger:
    """The ledger of each backend in turn."""
    return backend.ledger


@pytest.fixture(params=DURABLE_BACKENDS)
def shared_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backends several processes can share: SQLite and PostgreSQL."""
    if request.param == "sqlite":
        yield from sqlite_backend(tmp_path)
    else:
        yield from postgres_backend(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def pg_backend(pg_dsn: str) -> Iterator[Backend]:
    """A PostgreSQL backend on its own table."""
    yield from postgres_backend(pg_dsn)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    """Worker processes for race and crash tests, killed at the end of the test."""
    pool = Workers(tmp_path)
    try:
        yield pool
    finally:
        pool.kill_all()
