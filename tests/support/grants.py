"""Shared pieces of the grants tests: a provider on SQLite or PostgreSQL with named people."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from approval_guard.provider import PostgresStore, ProviderServer, Store
from approval_guard.provider.rules.config import parse_rules
from tests.support.api import Api
from tests.support.fakes import ManualClock


@attrs.define
class Desk:
    """A running provider, its store, its clock, an agent and reviewers by name."""

    server: ProviderServer
    store: Any
    clock: ManualClock
    agent: Api
    tokens: dict[str, str]

    def as_(self, name: str) -> Api:
        return Api(self.server.url, self.tokens[name])

    def grant(self, request_id: str, who: str, grant: dict[str, Any], **body: Any) -> Any:
        answer = self.as_(who).decide(request_id, {"status": "approved", **body, "grant": grant})
        return answer


def open_desk(
    kind: str,
    dsn: str | None,
    rules: str = "",
    reviewers: dict[str, list[str]] | None = None,
    tmp_path: Any = None,
) -> Desk:
    """A provider on ``kind`` ("sqlite" or "postgres") with a manual clock and reviewers."""
    clock = ManualClock()
    store: Any
    if kind == "postgres":
        assert dsn is not None
        store = PostgresStore(dsn, clock=clock.now)
    else:
        store = Store(str(tmp_path / "grants.sqlite3"), clock=clock.now)
    server = ProviderServer(store, rules=parse_rules(rules) if rules else None)
    tokens = server.first_start_tokens
    assert tokens is not None
    server.start()
    names = {"instance": tokens.instance}
    for name, roles in (reviewers or {"alice": [], "bob": [], "carol": []}).items():
        names[name] = store.add_reviewer(name, roles=roles)
    return Desk(
        server=server,
        store=store,
        clock=clock,
        agent=Api(server.url, tokens.instance),
        tokens=names,
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_kind(request: pytest.FixtureRequest) -> Iterator[tuple[str, str | None]]:
    """("sqlite", None) or ("postgres", a DSN of a schema of its own)."""
    if request.param == "sqlite":
        yield "sqlite", None
    else:
        yield "postgres", request.getfixturevalue("pg_schema_dsn")
