"""Batched waits (API 1.2) on two PostgreSQL instances: one decides, the other wakes a wait."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard.provider import PostgresStore, ProviderServer
from tests.support.api import Api, in_thread

pytestmark = pytest.mark.postgres


@pytest.fixture
def two(pg_schema_dsn: str) -> Iterator[tuple[ProviderServer, ProviderServer, str, str]]:
    """Two ProviderServers on their own PostgresStores of one schema, and the two tokens."""
    stores = [PostgresStore(pg_schema_dsn), PostgresStore(pg_schema_dsn)]
    servers = [ProviderServer(store) for store in stores]
    tokens = servers[0].first_start_tokens
    assert tokens is not None
    for server in servers:
        server.start()
    try:
        yield servers[0], servers[1], tokens.instance, tokens.reviewer
    finally:
        for server in servers:
            server.close()
        for store in stores:
            store.close()


def test_a_decision_on_one_instance_wakes_a_batched_wait_on_the_other(
    two: tuple[ProviderServer, ProviderServer, str, str],
) -> None:
    """Waiting on A for three requests, a denial recorded on B answers it at once."""
    a, b, instance, reviewer = two
    api = Api(a.url, instance)
    made = [api.new() for _ in range(3)]

    def wait() -> requests.Response:
        return api.session.post(
            f"{a.url}/v1/requests/wait",
            json={"ids": [m["id"] for m in made], "wait": "30s"},
            headers=api.headers(),
            timeout=60,
        )

    thread, out = in_thread(wait)
    assert a.wait_for_waiting_polls(3, timeout=10)
    decided = time.monotonic()
    denial = Api(b.url, reviewer).decide(made[2]["id"], {"status": "denied", "note": "no"})
    assert 200 == denial.status_code
    thread.join(20)
    assert time.monotonic() - decided < 5
    body = out[0].json()
    assert [(made[2]["id"], "denied")] == [(r["id"], r["status"]) for r in body["requests"]]


def test_async_calls_waiting_on_one_instance_run_when_approved_on_the_other(
    two: tuple[ProviderServer, ProviderServer, str, str],
) -> None:
    """Async calls batched on A run once each when a reviewer on B approves them."""
    a, b, instance, reviewer = two
    guard = ag.Guard(
        base_url=a.url, credential=instance, harness_limit="1m", poll_wait="30s",
        ledger=ag.MemoryLedger(),
    )  # fmt: skip
    ran: list[int] = []

    @guard.requires_approval(timeout="10m")
    async def refund(n: int) -> int:
        ran.append(n)
        return n

    async def main() -> list[Any]:
        tasks = [asyncio.create_task(refund(n)) for n in range(20)]
        deadline = time.monotonic() + 20
        while not a.wait_for_waiting_polls(20, 0):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        listed = Api(b.url, reviewer).get("/v1/requests?status=pending").json()["requests"]
        for request in listed:
            Api(b.url, reviewer).decide(request["id"], {"status": "approved"})
        results = list(await asyncio.wait_for(asyncio.gather(*tasks), 30))
        await guard.aclose()
        return results

    assert list(range(20)) == asyncio.run(main())
    assert list(range(20)) == sorted(ran)


def test_an_id_with_a_nul_is_not_found_at_once_on_postgresql(
    two: tuple[ProviderServer, ProviderServer, str, str],
) -> None:
    """PostgreSQL cannot hold U+0000: such an id is not found (never a 500), the rest are read."""
    a, _, instance, reviewer = two
    api = Api(a.url, instance)
    made = api.new()
    assert 200 == Api(a.url, reviewer).decide(made["id"], {"status": "denied"}).status_code
    started = time.monotonic()
    answer = api.session.post(
        f"{a.url}/v1/requests/wait",
        json={"ids": ["a\u0000b", made["id"]], "wait": "30s"},
        headers=api.headers(),
        timeout=60,
    )
    assert 200 == answer.status_code
    assert time.monotonic() - started < 5
    body = answer.json()
    assert ["a\u0000b"] == body["not_found"]
    assert [(made["id"], "denied")] == [(r["id"], r["status"]) for r in body["requests"]]
