"""Store work from the event loop: at once on the loop when nothing waits, else a worker thread.

``StoreCalls`` against a real SQLite file; then the served provider with the
file's write lock held by another connection, where a decision must wait in
a worker thread while the loop goes on answering everyone else.
"""

# House style puts the expected value first; ruff's SIM300 wants it last.

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from approval_guard.provider import ProviderServer
from approval_guard.provider.http.store_calls import StoreCalls
from approval_guard.provider.store.models import StoreClosedError
from approval_guard.provider.store.sqlite_group import SQLiteTransactions
from tests.provider.store.test_group_commit import Commits
from tests.support.group import Gate
from tests.support.group_env import GroupEnv


@pytest.fixture
def env(tmp_path: Path) -> Iterator[GroupEnv]:
    made = GroupEnv("sqlite", str(tmp_path / "calls.sqlite3"))
    try:
        yield made
    finally:
        made.store.close()


def test_calls_made_in_one_turn_share_one_commit_on_the_loop(
    env: GroupEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five decisions awaited together: one COMMIT, all run on the loop's own thread."""
    from approval_guard.provider.http import store_calls

    # However loaded the machine: the five fit in one turn's time.
    monkeypatch.setattr(store_calls, "TURN_SECONDS", 60.0)
    ids = env.new(5)
    commits = Commits(env.store)
    threads: set[int] = set()

    def decide(request_id: str) -> str:
        threads.add(threading.get_ident())
        return env.decide(request_id)

    async def main() -> list[str]:
        calls = StoreCalls(env.store, asyncio.get_running_loop())
        return await asyncio.gather(*(calls(decide, rid) for rid in ids))

    assert ["approved"] * 5 == asyncio.run(main())
    assert 1 == commits.n
    assert {threading.get_ident()} == threads


def test_a_call_that_raises_reaches_its_caller_alone(env: GroupEnv) -> None:
    """One call's error is raised to its own awaiter; the others get their values."""
    first, second = env.new(2)

    async def main() -> list[Any]:
        calls = StoreCalls(env.store, asyncio.get_running_loop())
        return list(
            await asyncio.gather(
                calls(env.decide, first),
                calls(env.decide, "no-such-request"),
                calls(env.decide, second),
                return_exceptions=True,
            )
        )

    results = asyncio.run(main())
    assert "approved" == results[0] and "approved" == results[2]
    assert isinstance(results[1], AssertionError)  # Env.decide's own check: no such request


def test_a_caller_cancelled_before_its_turn_never_runs_its_call(env: GroupEnv) -> None:
    """Cancelled while queued: the call is dropped, the others run."""
    first, second = env.new(2)
    ran: list[str] = []

    def decide(request_id: str) -> str:
        ran.append(request_id)
        return env.decide(request_id)

    async def main() -> str:
        calls = StoreCalls(env.store, asyncio.get_running_loop())
        doomed = asyncio.ensure_future(calls(decide, first))
        kept = asyncio.ensure_future(calls(decide, second))
        await asyncio.sleep(0)  # both queued
        doomed.cancel()
        return await kept

    assert "approved" == asyncio.run(main())
    assert [second] == ran
    assert "pending" == env.status(first)


def test_with_the_writer_busy_calls_go_to_worker_threads(env: GroupEnv) -> None:
    """A worker thread holds the writer lock: the call waits in a thread, the loop does not."""
    (request_id,) = env.new(1)
    gate = Gate(env.store)
    threads: list[int] = []

    def decide() -> str:
        threads.append(threading.get_ident())
        return env.decide(request_id)

    async def main() -> tuple[str, float]:
        loop_thread = threading.get_ident()
        calls = StoreCalls(env.store, asyncio.get_running_loop())
        waiting = asyncio.ensure_future(calls(decide))
        started = time.monotonic()
        # The loop is free meanwhile: it hears back from this helper thread once the
        # call blocks on the writer lock in a worker thread.
        await asyncio.to_thread(gate.wait_for, 1)
        free = time.monotonic() - started
        assert not waiting.done()
        threading.Thread(target=gate.open_when, args=(1,), daemon=True).start()
        status = await waiting
        assert loop_thread not in threads
        return status, free

    status, free = asyncio.run(main())
    assert "approved" == status
    assert free < 1.0
    assert "approved" == env.status(request_id)


def test_a_closed_store_is_raised_to_every_caller(env: GroupEnv) -> None:
    """StoreClosedError reaches each awaiter of the turn."""
    env.store.close()

    async def main() -> list[Any]:
        calls = StoreCalls(env.store, asyncio.get_running_loop())
        return list(
            await asyncio.gather(
                calls(env.store.get_request, "a"),
                calls(env.store.get_request, "b"),
                return_exceptions=True,
            )
        )

    assert 2 * [StoreClosedError] == [type(r) for r in asyncio.run(main())]


def test_stores_without_run_at_once_use_worker_threads() -> None:
    """A store with no ``run_at_once`` (PostgreSQL's kind): every call in a worker thread."""

    class Plain:
        def answer(self) -> int:
            return threading.get_ident()

    async def main() -> tuple[int, int]:
        calls = StoreCalls(Plain(), asyncio.get_running_loop())
        return threading.get_ident(), await calls(Plain().answer)

    loop_thread, call_thread = asyncio.run(main())
    assert loop_thread != call_thread


def test_a_served_decision_waits_out_another_processes_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file's write lock held elsewhere: the decision waits (and is kept); the loop serves."""
    db = tmp_path / "served.sqlite3"
    with ProviderServer(str(db)) as server:
        instance = server.store.create_credential("instance", "agent")
        reviewer = server.store.create_credential("reviewer", "alice")
        made = requests.post(
            f"{server.url}/v1/requests",
            json={"tool": "t", "arguments": {}, "timeout": "10m"},
            headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": "k1"},
            timeout=10,
        )
        assert 201 == made.status_code, made.text
        request_id = made.json()["id"]
        other = sqlite3.connect(str(db), isolation_level=None, timeout=10)
        other.execute("BEGIN IMMEDIATE")
        # Set once a writer waits for the lock in a worker thread (the only writer
        # from here on is the decision): the read below then runs while it waits.
        waiting = threading.Event()
        begin = SQLiteTransactions.begin

        def noted_begin(self: SQLiteTransactions) -> None:
            waiting.set()
            begin(self)

        monkeypatch.setattr(SQLiteTransactions, "begin", noted_begin)
        decided: list[requests.Response] = []
        decider = threading.Thread(
            target=lambda: decided.append(
                requests.post(
                    f"{server.url}/v1/requests/{request_id}/decision",
                    json={"status": "approved"},
                    headers={"Authorization": f"Bearer {reviewer}"},
                    timeout=30,
                )
            )
        )
        try:
            decider.start()
            assert waiting.wait(10)
            started = time.monotonic()
            read = requests.get(
                f"{server.url}/v1/requests/{request_id}",
                headers={"Authorization": f"Bearer {reviewer}"},
                timeout=10,
            )
            took = time.monotonic() - started
            assert 200 == read.status_code and "pending" == read.json()["status"]
            assert took < 1.0  # the loop was not held by the waiting decision
            assert decider.is_alive()
        finally:
            other.execute("ROLLBACK")
            other.close()
        decider.join(20)
        assert 200 == decided[0].status_code, decided[0].text
        assert "approved" == decided[0].json()["status"]
        stored = server.store.get_request(request_id)
        assert stored is not None and "approved" == stored.status


def test_a_long_queue_is_run_over_several_turns_and_the_loop_serves_in_between(
    env: GroupEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls taking 8 ms each, 30 ms a turn at most: several COMMITs, a ticker runs between."""
    from approval_guard.provider.http import store_calls

    monkeypatch.setattr(store_calls, "TURN_SECONDS", 0.03)
    ids = env.new(8)
    commits = Commits(env.store)
    order: list[str] = []

    def slow_decide(request_id: str) -> str:
        order.append("call")
        time.sleep(0.008)
        return env.decide(request_id)

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            order.append("tick")
            await asyncio.sleep(0)

    async def main() -> list[str]:
        calls = StoreCalls(env.store, asyncio.get_running_loop())
        stop = asyncio.Event()
        ticking = asyncio.ensure_future(ticker(stop))
        await asyncio.sleep(0)
        done = await asyncio.gather(*(calls(slow_decide, rid) for rid in ids))
        stop.set()
        await ticking
        return list(done)

    assert ["approved"] * 8 == asyncio.run(main())
    assert 2 <= commits.n < 8
    calls_seen = "".join("c" if one == "call" else "t" for one in order).strip("t")
    assert "t" in calls_seen  # the loop ran the ticker between two turns
    assert ["approved"] * 8 == [env.status(rid) for rid in ids]


def test_creates_and_decisions_are_stored_on_the_providers_own_loop(tmp_path: Path) -> None:
    """With the writer free, a served create and decision never hop to a worker thread."""
    from approval_guard.provider.store.sqlite import SQLiteStore

    seen: list[str] = []

    class Recording(SQLiteStore):
        def create_request(self, **kwargs: Any) -> Any:
            seen.append(threading.current_thread().name)
            return super().create_request(**kwargs)

        def decide_granting(self, request_id: str, **kwargs: Any) -> Any:
            seen.append(threading.current_thread().name)
            return super().decide_granting(request_id, **kwargs)

    store = Recording(str(tmp_path / "loop.sqlite3"))
    try:
        instance = store.create_credential("instance", "agent")
        reviewer = store.create_credential("reviewer", "alice")
        with ProviderServer(store) as server:
            made = requests.post(
                f"{server.url}/v1/requests",
                json={"tool": "t", "arguments": {}, "timeout": "10m"},
                headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": "k"},
                timeout=10,
            )
            assert 201 == made.status_code, made.text
            decided = requests.post(
                f"{server.url}/v1/requests/{made.json()['id']}/decision",
                json={"status": "approved"},
                headers={"Authorization": f"Bearer {reviewer}"},
                timeout=10,
            )
            assert 200 == decided.status_code, decided.text
    finally:
        store.close()
    assert ["approval-guard-provider"] * 2 == seen


def test_a_long_expiry_never_holds_the_providers_loop(tmp_path: Path) -> None:
    """Expiring takes 1.5 s (thousands overdue after a restart): the loop answers meanwhile."""
    from approval_guard.provider.store.sqlite import SQLiteStore

    expiring = threading.Event()

    class SlowExpiry(SQLiteStore):
        def _before_commit(self, tx: Any, events: Any) -> None:
            # As long as the store's expiry of some 30,000 overdue requests takes here.
            if any("expired" == event[1] for event in events):
                expiring.set()
                time.sleep(1.5)
            super()._before_commit(tx, events)

    store = SlowExpiry(str(tmp_path / "expiry.sqlite3"))
    try:
        instance = store.create_credential("instance", "agent")
        reviewer = store.create_credential("reviewer", "alice")
        owner = store.authenticate(instance)
        assert owner is not None
        with ProviderServer(store) as server:
            kept = store.create_request(
                owner=owner, idempotency_key="kept", tool="t", arguments={}, timeout_seconds=600
            ).request
            store.create_request(
                owner=owner, idempotency_key="due", tool="t", arguments={}, timeout_seconds=1
            )
            assert expiring.wait(10)
            started = time.monotonic()
            missing = requests.get(f"{server.url}/nope", timeout=10)
            read = requests.get(
                f"{server.url}/v1/requests/{kept.id}",
                headers={"Authorization": f"Bearer {reviewer}"},
                timeout=10,
            )
            took = time.monotonic() - started
            assert 404 == missing.status_code
            assert 200 == read.status_code and "pending" == read.json()["status"]
            assert took < 0.75, took  # not held until the expiry's 1.5 s are over
    finally:
        store.close()
