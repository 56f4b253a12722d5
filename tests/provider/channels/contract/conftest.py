"""The contract suite's setup: every channel's driver, on SQLite and on PostgreSQL, with a team."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.rules.config import parse_rules
from approval_guard.provider.store.protocol import StoreProtocol
from tests.provider.channels.contract.drivers import DRIVERS, Driver
from tests.support.api import Api

#: issue_refund: two of payments, never by who asked; small_refund: one of payments.
RULES = """\
[tools.issue_refund]
approvers = ["payments"]
approvals_required = 2
self_approval = false

[tools.small_refund]
approvers = ["payments"]
self_approval = false
"""

#: name -> roles. carol may not decide refunds; dave is removed in some tests.
ROLES = {"alice": ["payments"], "bob": ["payments"], "carol": ["ops"], "dave": ["payments"]}


@attrs.define
class Setup:
    driver: Driver
    server: ProviderServer
    store: StoreProtocol
    agent: Api
    tokens: dict[str, str]

    def new(self, tool: str = "small_refund", **fields: Any) -> dict[str, Any]:
        body = {
            "tool": tool,
            "arguments": {"payment_id": "p_1", "amount": 4900},
            "timeout": "30m",
            **fields,
        }
        return self.agent.new(body=body)

    def status(self, request_id: str) -> str:
        request = self.store.get_request(request_id)
        assert request is not None
        return request.status

    def decisions_in_audit(self, request_id: str) -> list[str]:
        return [
            row.action
            for row in self.store.audit(request_id=request_id)
            if row.action.startswith(("request.approv", "request.decided", "request.denied"))
        ]


def _stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreProtocol]:
    store: StoreProtocol
    if request.param == "sqlite":
        store = Store(str(tmp_path / "contract.db"))
    else:
        from approval_guard.provider import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_schema_dsn"))
    try:
        yield store
    finally:
        store.close()


#: PostgreSQL in the slow run (``.ci/run`` runs both): the default run stays near three minutes.
@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreProtocol]:
    yield from _stores(request, tmp_path)


def _started(name: str, backend: StoreProtocol) -> Iterator[Setup]:
    driver = DRIVERS[name]()
    with driver.running():
        tokens = {
            person: backend.add_reviewer(person, roles=roles) for person, roles in ROLES.items()
        }
        for person in ROLES:
            identity = driver.identity(person)
            if identity is not None:
                backend.link_identity(person, driver.name, identity)
        server = ProviderServer(backend, rules=parse_rules(RULES), **driver.options())
        first = server.first_start_tokens
        assert first is not None
        with server:
            driver.store = backend
            driver.url = server.url
            yield Setup(driver, server, backend, Api(server.url, first.instance), tokens)


@pytest.fixture(params=sorted(DRIVERS))
def setup(request: pytest.FixtureRequest, backend: StoreProtocol) -> Iterator[Setup]:
    """Every channel."""
    yield from _started(request.param, backend)


@pytest.fixture(params=sorted(name for name, driver in DRIVERS.items() if driver.acts))
def acting(request: pytest.FixtureRequest, backend: StoreProtocol) -> Iterator[Setup]:
    """Every channel people act through (all but webhooks)."""
    yield from _started(request.param, backend)


@pytest.fixture(params=sorted(name for name, driver in DRIVERS.items() if driver.follows))
def following(request: pytest.FixtureRequest, backend: StoreProtocol) -> Iterator[Setup]:
    """Every channel whose message follows an approval counted (Slack, Discord)."""
    yield from _started(request.param, backend)
