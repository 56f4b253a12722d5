"""Fixtures of the DBOS tests: DBOS launched in this process, and DBOS applications as processes.

The worker script is ``tests/support/dbos_worker.py``; the processes are started
and collected by ``tests/support/ledger.py``'s ``Workers``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import pytest

from tests.support.durable import DBOS_WORKER
from tests.support.ledger import Backend, Workers, postgres_backend, sqlite_backend


@pytest.fixture
def dbos_app(tmp_path: Path) -> Iterator[str]:
    """DBOS launched in this process on a SQLite system database; its URL. Destroyed after."""
    from dbos import DBOS

    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS(config={"name": "approval-guard-test", "system_database_url": url})
    DBOS.launch()
    try:
        yield url
    finally:
        DBOS.destroy()


@pytest.fixture
def file_provider(tmp_path: Path) -> Iterator[Any]:
    """A local provider on a SQLite file, so a test can read the keys it was sent."""
    from approval_guard.testing import LocalProvider

    with LocalProvider(str(tmp_path / "provider.sqlite")) as provider:
        yield provider


@attrs.frozen
class Durable:
    """Where a DBOS application keeps its workflows (``system``) and its execution record."""

    name: str
    system: str
    ledger: Backend


def _postgres_database(dsn: str) -> Iterator[str]:
    """A fresh database on the test server for one DBOS system database; dropped after."""
    import psycopg

    name = f"ag_dbos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlsplit(dsn)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Durable]:
    """DBOS's system database and the execution record: SQLite files, or PostgreSQL."""
    if request.param == "sqlite":
        for ledger in sqlite_backend(tmp_path):
            yield Durable("sqlite", f"sqlite:///{tmp_path / 'dbos.sqlite'}", ledger)
        return
    dsn = request.getfixturevalue("pg_dsn")
    for system in _postgres_database(dsn):
        for ledger in postgres_backend(dsn):
            yield Durable("postgres", system, ledger)


@pytest.fixture
def dbos_workers(tmp_path: Path) -> Iterator[Workers]:
    """DBOS application processes (``dbos_worker.py``), killed at the end of the test."""
    pool = Workers(tmp_path, script=DBOS_WORKER)
    try:
        yield pool
    finally:
        pool.kill_all()
