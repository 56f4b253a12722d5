"""POST /v1/requests/wait (API 1.2): one request waiting on many ids, answered at the first news."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard.provider import ProviderServer
from approval_guard.provider.http.wait_many import MAX_WAIT_IDS
from approval_guard.testing import LocalProvider
from tests.support.api import REFUND, Api, error_type, eventually, in_thread
from tests.support.databases import SharedDatabase, only_postgres
from tests.support.team import RULES, start_team


def _wait(api: Api, body: Any, **kwargs: Any) -> requests.Response:
    kwargs.setdefault("timeout", 90)
    return api.session.post(
        f"{api.url}/v1/requests/wait", json=body, headers=api.headers(), **kwargs
    )


def test_a_decided_request_is_answered_at_once(api: Api, provider: LocalProvider) -> None:
    """A listed request that is already decided comes back at once, as GET shows it."""
    first, second = api.new(), api.new()
    provider.approve(second["id"])
    started = time.monotonic()
    response = _wait(api, {"ids": [first["id"], second["id"]], "wait": "30s"})
    assert time.monotonic() - started < 1.0
    assert 200 == response.status_code
    body = response.json()
    assert {"requests", "not_found"} == set(body)
    assert [api.poll(second["id"]).json()] == body["requests"]
    assert [] == body["not_found"]


def test_a_decision_wakes_the_wait_with_only_that_request(
    api: Api, provider: LocalProvider
) -> None:
    """Waiting on three, a decision on one answers with that one alone, at once."""
    made = [api.new() for _ in range(3)]
    thread, out = in_thread(lambda: _wait(api, {"ids": [m["id"] for m in made], "wait": "30s"}))
    assert provider.wait_for_polls(3, timeout=5)
    decided = time.monotonic()
    provider.deny(made[1]["id"], "no")
    thread.join(10)
    assert time.monotonic() - decided < 1.0
    body = out[0].json()
    assert [made[1]["id"]] == [r["id"] for r in body["requests"]]
    assert "denied" == body["requests"][0]["status"]


def test_nothing_new_answers_empty_at_the_end_of_wait(api: Api) -> None:
    """With no news, the answer comes when wait has passed, listing nothing."""
    created = api.new()
    started = time.monotonic()
    response = _wait(api, {"ids": [created["id"]], "wait": "1s"})
    assert 0.9 <= time.monotonic() - started < 5
    assert {"requests": [], "not_found": []} == response.json()


def test_unknown_and_other_credentials_ids_are_not_found_alike(
    api: Api, provider: LocalProvider
) -> None:
    """An id of another instance's request is reported exactly as an unknown id: not found."""
    other_token = provider.store.create_credential("instance", "other")
    other = Api(provider.url, other_token).new()
    mine = api.new()
    response = _wait(api, {"ids": [mine["id"], other["id"], "no-such-id"], "wait": "30s"})
    body = response.json()
    assert [] == body["requests"]
    assert [other["id"], "no-such-id"] == body["not_found"]
    assert other["tool"] not in response.text or mine["tool"] == other["tool"]
    assert other["deadline_at"] not in response.text


def test_a_reviewer_may_wait_on_any_request(api: Api, provider: LocalProvider) -> None:
    """A reviewer credential reads every request, as with GET."""
    created = api.new()
    provider.approve(created["id"])
    reviewer = Api(provider.url, provider.reviewer_credential)
    body = _wait(reviewer, {"ids": [created["id"]], "wait": "5s"}).json()
    assert [created["id"]] == [r["id"] for r in body["requests"]]


def test_an_approval_short_of_the_quorum_is_news(tmp_path: Path) -> None:
    """While two approvals are needed, the first one answers the wait (still pending)."""
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    team = start_team(str(tmp_path / "team.sqlite3"), rules)
    try:
        team.tokens["alice"] = team.server.store.add_reviewer("alice", roles=["payments"])
        body = {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m"}
        created = team.instance.new(body=body)
        thread, out = in_thread(
            lambda: _wait(team.instance, {"ids": [created["id"]], "wait": "30s"})
        )
        assert team.server.wait_for_waiting_polls(1, timeout=5)
        thread.join(0.3)
        assert thread.is_alive()  # nothing changed yet
        assert (
            200 == team.reviewer("alice").decide(created["id"], {"status": "approved"}).status_code
        )
        thread.join(10)
        [item] = out[0].json()["requests"]
        assert ("pending", ["alice"]) == (item["status"], [a["by"] for a in item["approvals"]])
    finally:
        team.server.close()


def test_a_deadline_passing_answers_expired(api: Api) -> None:
    """A request whose deadline passes while the batch waits comes back expired at once."""
    created = api.new(timeout="1s")
    started = time.monotonic()
    body = _wait(api, {"ids": [created["id"]], "wait": "30s"}).json()
    assert time.monotonic() - started < 5
    assert ["expired"] == [r["status"] for r in body["requests"]]


def test_a_batched_wait_counts_as_a_poll_of_each(api: Api, provider: LocalProvider) -> None:
    """The audit trail counts a batched wait as one poll of each request it lists."""
    made = [api.new() for _ in range(2)]
    _wait(api, {"ids": [m["id"] for m in made], "wait": "0s"})
    # Written beside the answer, not before it.
    assert eventually(lambda: [1, 1] == [provider.history(m["id"]).poll_count for m in made])


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ids": []},
        {"ids": "abc"},
        {"ids": [1]},
        {"ids": [""]},
        {"ids": ["a" * 201]},
        {"ids": ["a", "a"]},
        {"ids": ["a"], "wait": 5},
        {"ids": ["a"], "wait": "5 seconds"},
        {"ids": ["a"], "extra": True},
        {"ids": [f"id-{n}" for n in range(MAX_WAIT_IDS + 1)]},
        [],
    ],
)
def test_bad_bodies_are_400(api: Api, body: Any) -> None:
    """A malformed batched wait is 400 invalid_request, and waits for nothing."""
    response = _wait(api, body, timeout=10)
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)


def test_the_most_ids_allowed_are_accepted(api: Api) -> None:
    """Exactly the documented maximum of ids is a valid wait."""
    created = api.new()
    ids = [created["id"], *(f"id-{n}" for n in range(MAX_WAIT_IDS - 1))]
    response = _wait(api, {"ids": ids, "wait": "0s"})
    assert 200 == response.status_code
    assert MAX_WAIT_IDS - 1 == len(response.json()["not_found"])


def test_without_a_credential_it_is_401(provider: LocalProvider) -> None:
    """No bearer credential: 401, as for every /v1 call."""
    response = _wait(Api(provider.url, None), {"ids": ["a"], "wait": "0s"})
    assert 401 == response.status_code


def test_get_is_not_allowed_on_the_wait_path(api: Api) -> None:
    """GET /v1/requests/wait is 405 naming POST (no request id is "wait")."""
    response = api.get("/v1/requests/wait", timeout=10)
    assert 405 == response.status_code
    assert "POST" == response.headers["Allow"]


# --------------------------------------------------------------------------- two instances


@pytest.fixture
def two(shared_db: SharedDatabase) -> Iterator[tuple[ProviderServer, ProviderServer, str, str]]:
    """Two ProviderServers, each on its own store of one database, and the two tokens."""
    stores = [shared_db.open(), shared_db.open()]
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


@only_postgres  # LISTEN/NOTIFY: SQLite instances learn of it only at their next look
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


@only_postgres  # LISTEN/NOTIFY: SQLite instances learn of it only at their next look
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


@only_postgres
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
