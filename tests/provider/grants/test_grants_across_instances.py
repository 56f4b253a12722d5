"""Grants on two instances of one PostgreSQL database: uses exact under races, revocation seen."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from approval_guard.provider import PostgresStore, ProviderServer
from tests.support.api import REFUND, Api

pytestmark = pytest.mark.postgres


@pytest.fixture
def two(pg_schema_dsn: str) -> Iterator[tuple[ProviderServer, ProviderServer, dict[str, str]]]:
    """Two ProviderServers on one schema; alice added."""
    stores = [PostgresStore(pg_schema_dsn), PostgresStore(pg_schema_dsn)]
    servers = [ProviderServer(store) for store in stores]
    tokens = servers[0].first_start_tokens
    assert tokens is not None
    names = {"instance": tokens.instance, "alice": stores[0].add_reviewer("alice")}
    for server in servers:
        server.start()
    try:
        yield servers[0], servers[1], names
    finally:
        for server in servers:
            server.close()
        for store in stores:
            store.close()


def test_fifty_creates_over_two_instances_use_a_ten_use_grant_exactly_ten_times(
    two: tuple[ProviderServer, ProviderServer, dict[str, str]],
) -> None:
    """50 covered creates at once, half on each instance: 10 approved by the grant, 40 pending."""
    a, b, tokens = two
    first = Api(a.url, tokens["instance"]).new()
    answer = Api(a.url, tokens["alice"]).decide(
        first["id"], {"status": "approved", "grant": {"for": "1h", "uses": 10}}
    )
    assert answer.status_code == 200, answer.text
    barrier = threading.Barrier(50)
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def create(server: ProviderServer) -> None:
        api = Api(server.url, tokens["instance"])
        barrier.wait()
        made = api.new()
        with lock:
            results.append(made)

    threads = [threading.Thread(target=create, args=((a, b)[n % 2],)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    statuses = sorted(one["status"] for one in results)
    assert statuses.count("approved") == 10 and statuses.count("pending") == 40
    approved = [one for one in results if one["status"] == "approved"]
    assert sorted(one["decision"]["grant"]["uses_left"] for one in approved) == list(range(10))
    grant = Api(b.url, tokens["alice"]).get(f"/v1/grants/{answer.json()['grant']['id']}").json()
    assert grant["status"] == "used_up" and grant["uses_left"] == 0


def test_a_revocation_on_one_instance_holds_for_the_next_create_on_the_other(
    two: tuple[ProviderServer, ProviderServer, dict[str, str]],
) -> None:
    """Revoked on A: the very next create on B is asked of a person, every time."""
    a, b, tokens = two
    agent_b = Api(b.url, tokens["instance"])
    for n in range(5):
        arguments = {**REFUND, "payment_id": f"p{n}"}
        first = Api(a.url, tokens["instance"]).new(arguments=arguments)
        grant = (
            Api(a.url, tokens["alice"])
            .decide(first["id"], {"status": "approved", "grant": {"for": "1h"}})
            .json()["grant"]
        )
        assert agent_b.new(arguments=arguments)["status"] == "approved"
        alice = Api(a.url, tokens["alice"])
        revoked = alice.session.post(
            f"{a.url}/v1/grants/{grant['id']}/revoke", json={}, headers=alice.headers()
        )
        assert revoked.status_code == 200
        assert agent_b.new(arguments=arguments)["status"] == "pending"


def test_creates_racing_a_revocation_are_never_covered_after_its_answer(
    two: tuple[ProviderServer, ProviderServer, dict[str, str]],
) -> None:
    """Creates on B race a revoke on A: none sent after the revoke's answer is covered."""
    a, b, tokens = two
    first = Api(a.url, tokens["instance"]).new()
    grant = (
        Api(a.url, tokens["alice"])
        .decide(first["id"], {"status": "approved", "grant": {"for": "1h"}})
        .json()["grant"]
    )
    revoked_at = threading.Event()
    after: list[str] = []
    stop = threading.Event()

    def keep_creating() -> None:
        api = Api(b.url, tokens["instance"])
        while not stop.is_set():
            sent_after = revoked_at.is_set()
            status = api.new()["status"]
            if sent_after:
                after.append(status)
                if len(after) >= 20:
                    return

    threads = [threading.Thread(target=keep_creating) for _ in range(4)]
    for thread in threads:
        thread.start()
    alice = Api(a.url, tokens["alice"])
    answer = alice.session.post(
        f"{a.url}/v1/grants/{grant['id']}/revoke", json={}, headers=alice.headers()
    )
    assert answer.status_code == 200
    revoked_at.set()
    for thread in threads:
        thread.join(60)
    stop.set()
    assert after and set(after) == {"pending"}
