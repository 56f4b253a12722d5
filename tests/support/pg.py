"""A PostgreSQL server for the tests that need one: fixture ``pg_dsn``, and a fresh schema each.

PostgreSQL comes from ``APPROVAL_GUARD_TEST_DSN`` when it is set (``eval
"$(.ci/postgres.sh)"`` sets it). Otherwise the session starts a throwaway server
with ``.ci/postgres.sh`` if ``initdb`` is installed, and stops it at the end. With
neither, PostgreSQL tests skip, except under ``CI``, where they fail: CI must
never pass by skipping the only tests of the fleet-wide guarantees.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.support.paths import REPO

POSTGRES_SCRIPT = REPO / ".ci" / "postgres.sh"


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required under CI: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL server: {reason}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN for a PostgreSQL database the tests may create tables in."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'approval-guard[postgres]')")
    dsn = os.environ.get("APPROVAL_GUARD_TEST_DSN")
    if dsn:
        yield dsn
        return
    have_initdb = shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not have_initdb or not POSTGRES_SCRIPT.exists():
        _unavailable(
            "APPROVAL_GUARD_TEST_DSN is unset and initdb is not installed to start a "
            'throwaway server (run: eval "$(.ci/postgres.sh)")'
        )
    # Not under pytest's tmp_path: that is private to this user, and the server may run
    # as the `postgres` user, which must reach its own directory.
    env = {
        **os.environ,
        "APPROVAL_GUARD_PG_DIR": str(Path(tempfile.gettempdir()) / f"ag-pg-{uuid.uuid4().hex}"),
        "APPROVAL_GUARD_PG_PORT": str(_free_port()),
        "APPROVAL_GUARD_PG_INSTALL": "0",
    }
    started = subprocess.run(
        [str(POSTGRES_SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=120
    )
    if started.returncode != 0:
        subprocess.run([str(POSTGRES_SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
        _unavailable(f"could not start a throwaway server: {started.stderr.strip()[-500:]}")
    line = started.stdout.strip().splitlines()[-1]
    try:
        yield line.split("=", 1)[1].strip("'")
    finally:
        subprocess.run([str(POSTGRES_SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


def schema_dsn(dsn: str, schema: str) -> str:
    """``dsn`` with ``schema`` first on its search path (its tables are made there)."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, options=f"-csearch_path={schema}")


@pytest.fixture
def pg_schema_dsn(pg_dsn: str) -> Iterator[str]:
    """A DSN whose tables live in a schema of their own, dropped after the test."""
    import psycopg

    schema = f"ag_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema_dsn(pg_dsn, schema)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
