"""The team rules on two instances of one database (SQLite, PostgreSQL): a quorum counted once."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests

from approval_guard.provider import PostgresStore, ProviderServer
from approval_guard.provider.rules.config import parse_rules
from tests.support.api import REFUND, Api
from tests.support.databases import SharedDatabase, only_postgres
from tests.support.team import RULES


@pytest.fixture
def two(
    shared_db: SharedDatabase,
) -> Iterator[tuple[ProviderServer, ProviderServer, dict[str, str]]]:
    """Two ProviderServers, each on its own store of one database; alice and bob added."""
    rules = parse_rules(RULES)
    stores = [shared_db.open(), shared_db.open()]
    servers = [ProviderServer(store, rules=rules) for store in stores]
    tokens = servers[0].first_start_tokens
    assert tokens is not None and servers[1].first_start_tokens is None
    names = {"instance": tokens.instance}
    for name in ("alice", "bob"):
        names[name] = stores[0].add_reviewer(name, roles=["payments"])
    for server in servers:
        server.start()
    try:
        yield servers[0], servers[1], names
    finally:
        for server in servers:
            server.close()
        for store in stores:
            store.close()


def test_a_quorum_across_two_instances_is_approved_exactly_once(
    two: tuple[ProviderServer, ProviderServer, dict[str, str]],
) -> None:
    """alice on A and bob on B, at the same instant, ten times: each counted, one completes."""
    a, b, tokens = two
    instance = Api(a.url, tokens["instance"])
    for _ in range(10):
        created = instance.new(body={"tool": "issue_refund", "arguments": REFUND, "timeout": "30m"})
        barrier = threading.Barrier(2)
        answers: list[requests.Response] = []

        def approve(
            server: ProviderServer,
            name: str,
            request_id: str = created["id"],
            barrier: threading.Barrier = barrier,
            answers: list[requests.Response] = answers,
        ) -> None:
            api = Api(server.url, tokens[name])
            barrier.wait()
            answers.append(api.decide(request_id, {"status": "approved"}))

        threads = [
            threading.Thread(target=approve, args=(a, "alice")),
            threading.Thread(target=approve, args=(b, "bob")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(15)
        assert [200, 200] == [r.status_code for r in answers], [r.text for r in answers]
        assert ["approved", "pending"] == sorted(r.json()["status"] for r in answers)
        final = Api(b.url, tokens["instance"]).poll(created["id"]).json()
        assert "approved" == final["status"]
        assert 2 == len(final["approvals"])
        assert {"alice", "bob"} == {one["by"] for one in final["approvals"]}
        assert final["decision"]["decided_by"] in ("alice, bob", "bob, alice")
        rows = a.store.audit(request_id=created["id"])
        approvals = [r for r in rows if r.action == "request.approval"]
        assert ["1 of 2", "2 of 2"] == [r.detail["approvals"] for r in approvals]
        history = a.store.history(created["id"])
        assert history is not None
        assert 1 == sum(1 for e in history.events if e.type == "decided")


def test_the_same_person_on_both_instances_counts_once(
    two: tuple[ProviderServer, ProviderServer, dict[str, str]],
) -> None:
    """alice on A and alice on B: one counted, the other 409 already_approved; still pending."""
    a, b, tokens = two
    created = Api(a.url, tokens["instance"]).new(
        body={"tool": "issue_refund", "arguments": REFUND, "timeout": "30m"}
    )
    first = Api(a.url, tokens["alice"]).decide(created["id"], {"status": "approved"})
    second = Api(b.url, tokens["alice"]).decide(created["id"], {"status": "approved"})
    assert (200, 409) == (first.status_code, second.status_code)
    assert "already_approved" == second.json()["error"]["type"]
    assert "pending" == Api(b.url, tokens["alice"]).poll(created["id"]).json()["status"]


def test_reviewers_and_audit_read_back(shared_db: SharedDatabase) -> None:
    """Roles are kept, removal revokes, audit rows read back, on each store."""
    store = shared_db.open()
    try:
        token = store.add_reviewer("carol", roles=["admin", "payments"])
        found = store.authenticate(token)
        assert found is not None and ("admin", "payments") == found.roles
        assert ["carol"] == [one.name for one in store.list_reviewers()]
        session_id, _ = store.create_session(found)
        assert store.remove_reviewer("carol")
        assert store.authenticate(token) is None
        assert store.session(session_id) is None
        assert ["reviewer.added", "reviewer.removed"] == [r.action for r in store.audit()]
    finally:
        store.close()


@only_postgres
def test_an_older_postgres_schema_gets_the_new_columns_on_open(shared_db: SharedDatabase) -> None:
    """Columns added since schema 1 are added (ADD COLUMN IF NOT EXISTS) when a store opens."""
    import psycopg

    pg_schema_dsn = shared_db.where
    PostgresStore(pg_schema_dsn).close()
    with psycopg.connect(pg_schema_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE ag_credentials DROP COLUMN roles")
        conn.execute("ALTER TABLE ag_requests DROP COLUMN requested_by, DROP COLUMN approval_list")
    store = PostgresStore(pg_schema_dsn)
    try:
        token = store.add_reviewer("dora", roles=["ops"])
        found = store.authenticate(token)
        assert found is not None and ("ops",) == found.roles
    finally:
        store.close()
