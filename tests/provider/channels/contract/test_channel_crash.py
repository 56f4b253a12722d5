"""The channel contract across a crash: a provider SIGKILLed mid-delivery delivers after restart.

The provider runs as ``approval-guard serve`` in a child process. A request is
made, its item reaches the channel's receiver, which holds its answer; the
provider is killed with SIGKILL while the item is in flight, the receiver
let go, and the provider started again on the same database: the item's lease
runs out and it is delivered, at least once (the receiver may see it twice).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from approval_guard.provider import Store
from approval_guard.provider.store.protocol import StoreProtocol
from tests.provider.channels.contract.conftest import ROLES, RULES
from tests.provider.channels.contract.drivers import DRIVERS, Driver
from tests.support.api import Api, wait_for
from tests.support.cli import free_port

pytestmark = pytest.mark.slow

INSTANCE = "agi_" + "c" * 40


def _is_dsn(where: str) -> bool:
    """A libpq connection string or URL, not a file path."""
    return where.startswith("postgres") or "dbname=" in where


def _open(where: str) -> StoreProtocol:
    if _is_dsn(where):
        from approval_guard.provider import PostgresStore

        return PostgresStore(where)
    return Store(where)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "crash.db")
    else:
        yield str(request.getfixturevalue("pg_schema_dsn"))


def _serve(driver: Driver, database: str, rules: Path, port: int) -> subprocess.Popen[bytes]:
    where = ["--dsn", database] if _is_dsn(database) else ["--db", database]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "approval_guard",
            "serve",
            *where,
            "--port",
            str(port),
            "--instance-token",
            INSTANCE,
            "--rules",
            str(rules),
            *driver.serve_args(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            requests.get(url, timeout=1)  # any answer: it listens
            return True
        except requests.RequestException:
            return False

    try:
        wait_for(up, timeout=30)
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    return proc


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_a_provider_killed_mid_delivery_delivers_after_restart(
    name: str, database: str, tmp_path: Path
) -> None:
    """SIGKILL while the item is in flight; started again, the item arrives (at least once)."""
    driver = DRIVERS[name]()
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    with driver.running():
        store = _open(database)
        try:
            for person, roles in ROLES.items():
                store.add_reviewer(person, roles=roles)
                identity = driver.identity(person)
                if identity is not None:
                    store.link_identity(person, driver.name, identity)
        finally:
            store.close()
        port = free_port()
        driver.hold(True)
        proc = _serve(driver, database, rules, port)
        try:
            body = {"tool": "small_refund", "arguments": {"payment_id": "p"}, "timeout": "30m"}
            made = Api(f"http://127.0.0.1:{port}", INSTANCE).new(body=body)
            driver.wait_in_flight()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            driver.hold(False)
            proc = _serve(driver, database, rules, port)
            store = _open(database)
            driver.store, driver.url = store, f"http://127.0.0.1:{port}"
            try:
                # Once the killed provider's lease has run out (a send's deadline and a margin).
                wait_for(
                    lambda: store.list_outbox(request_id=made["id"], channels=[driver.name]),
                    lambda rows: rows and all(row.state == "delivered" for row in rows),
                    timeout=150,
                )
                driver.wait_reached(made["id"])
            finally:
                store.close()
        finally:
            proc.kill()
            proc.wait(10)
