"""Store calls run at once on the calling thread: one transaction, answered after its COMMIT.

The event loop's way to the SQLite store (``run_at_once``): real files, real
threads and connections holding locks, real SQLite errors. Nothing here may
wait: when it would, nothing runs and the caller is told (None).
"""

# Calls are lambdas binding their arguments as defaults, which mypy cannot infer.
# mypy: disable-error-code="misc"

# House style puts the expected value first; ruff's SIM300 wants it last.

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from approval_guard.provider import Store
from approval_guard.provider.store.models import NotPendingError, StoreClosedError
from approval_guard.provider.store.sqlite_group import CommitFailed
from tests.provider.store.test_group_commit import Commits
from tests.support.api import wait_for
from tests.support.group import Boom, Gate
from tests.support.group_env import GroupEnv


@pytest.fixture
def env(tmp_path: Path) -> Iterator[GroupEnv]:
    made = GroupEnv("sqlite", str(tmp_path / "at-once.sqlite3"))
    try:
        yield made
    finally:
        made.store.close()


def _results(outcomes: list[Any] | None) -> list[Any]:
    assert outcomes is not None, "the calls did not run"
    out = []
    for outcome in outcomes:
        try:
            out.append(outcome.unwrap())
        except Exception as exc:
            out.append(exc)
    return out


def test_calls_run_in_one_transaction_and_are_seen_only_after_it(env: GroupEnv) -> None:
    """Three decisions: one COMMIT; another connection sees none of them before it."""
    ids = env.new(3)
    commits = Commits(env.store)
    seen_during: list[list[str]] = []

    def decide(request_id: str) -> str:
        status = env.decide(request_id)
        seen_during.append([env.status(one) for one in ids])
        return status

    outcomes = env.store.run_at_once([lambda rid=rid: decide(rid) for rid in ids])

    assert ["approved"] * 3 == _results(outcomes)
    assert 1 == commits.n
    assert [["pending"] * 3] * 3 == seen_during
    assert ["approved"] * 3 == [env.status(rid) for rid in ids]


def test_the_change_feed_hears_only_after_the_commit(env: GroupEnv) -> None:
    """Polls are woken once, after the COMMIT, naming every request the batch changed."""
    ids = env.new(2)
    heard: list[tuple[str, ...]] = []
    env.store.subscribe(lambda seq, request_ids: heard.append(request_ids))

    def decide(request_id: str) -> str:
        assert [] == heard  # nothing announced while the batch is open
        return env.decide(request_id)

    _results(env.store.run_at_once([lambda rid=rid: decide(rid) for rid in ids]))

    assert [tuple(ids)] == heard


def test_a_call_reads_what_the_calls_before_it_wrote(env: GroupEnv) -> None:
    """The second decision on one request sees the first (uncommitted) one: NotPendingError."""
    (request_id,) = env.new(1)
    results = _results(
        env.store.run_at_once(
            [
                lambda: env.decide(request_id, "first"),
                lambda: env.decide(request_id, "second", status="denied"),
                lambda: env.store.get_request(request_id),
            ]
        )
    )

    assert "approved" == results[0]
    assert isinstance(results[1], NotPendingError)
    assert "approved" == results[1].request.status
    assert "first" == results[2].decision.note
    assert 1 == env.decided_events(request_id)


def test_a_call_that_raises_undoes_only_its_own_writes(env: GroupEnv) -> None:
    """Its rows vanish, it gets its own error; the calls around it commit."""
    ids = env.new(3)

    def failing() -> None:
        env.decide(ids[1])

        def boom(tx: Any) -> None:
            raise Boom

        with env.store._writing() as tx:
            tx.execute("INSERT INTO meta (key, value) VALUES ('half-done', 'x')")
            boom(tx)

    results = _results(
        env.store.run_at_once([lambda: env.decide(ids[0]), failing, lambda: env.decide(ids[2])])
    )

    assert "approved" == results[0] and "approved" == results[2]
    assert isinstance(results[1], Boom)
    # The failing call's first write was its own savepoint, and is kept; its second is undone.
    assert ["approved"] * 3 == [env.status(rid) for rid in ids]
    assert [] == env.committed("SELECT 1 FROM meta WHERE key = 'half-done'")


def test_a_failed_commit_fails_every_call_and_keeps_nothing(env: GroupEnv) -> None:
    """One call's write makes the COMMIT fail: each call gets CommitFailed, none is kept."""
    env.poison()
    ids = env.new(4)
    heard: list[str] = []
    env.store.subscribe(lambda seq, request_ids: heard.extend(request_ids))
    notes = [None, "poison", None]

    results = _results(
        env.store.run_at_once(
            [lambda rid=rid, n=n: env.decide(rid, n) for rid, n in zip(ids, notes, strict=False)]
            + [lambda: env.store.get_request(ids[0])]
        )
    )

    assert 4 * [CommitFailed] == [type(r) for r in results]
    assert all(isinstance(r.__cause__, sqlite3.IntegrityError) for r in results)
    assert {"pending"} == {env.status(rid) for rid in ids}
    assert [] == heard
    assert not env.store._db.in_transaction
    assert ["approved"] == _results(env.store.run_at_once([lambda: env.decide(ids[3])]))


def test_nothing_runs_while_a_writer_thread_holds_the_lock(env: GroupEnv) -> None:
    """A worker thread's write holds the lock: None at once, and the call never ran."""
    (request_id,) = env.new(1)
    ran: list[str] = []
    gate = Gate(env.store)
    try:
        started = time.monotonic()
        outcome = env.store.run_at_once([lambda: ran.append(env.decide(request_id))])
        took = time.monotonic() - started
    finally:
        gate.open_when(0)

    assert outcome is None
    assert [] == ran
    assert took < 1.0  # it did not wait for the lock
    assert "pending" == env.status(request_id)


def test_nothing_runs_while_another_process_holds_the_write_lock(env: GroupEnv) -> None:
    """Another connection holds the file's write lock: None at once (no busy wait), nothing run.

    Once it lets go, calls run at once again.
    """
    (request_id,) = env.new(1)
    other = sqlite3.connect(env.where, isolation_level=None, timeout=10)
    try:
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        outcome = env.store.run_at_once([lambda: env.decide(request_id)])
        took = time.monotonic() - started
        other.execute("ROLLBACK")
    finally:
        other.close()

    assert outcome is None
    assert took < 1.0
    assert not env.store._db.in_transaction
    assert ["approved"] == _results(env.store.run_at_once([lambda: env.decide(request_id)]))


def test_a_worker_thread_queued_meanwhile_waits_and_is_answered(env: GroupEnv) -> None:
    """A worker-thread write arriving while calls run at once waits for the lock, then commits."""
    first, second = env.new(2)
    done: list[str] = []
    thread = threading.Thread(target=lambda: done.append(env.decide(second)))

    def decide_then_let_a_thread_queue() -> str:
        status = env.decide(first)
        thread.start()
        wait_for(lambda: env.store._group.waiting >= 1, timeout=10)
        return status

    assert ["approved"] == _results(env.store.run_at_once([decide_then_let_a_thread_queue]))
    thread.join(10)
    assert ["approved"] == done
    assert "approved" == env.status(second)


def test_a_closed_store_refuses_before_running_anything(env: GroupEnv) -> None:
    """StoreClosedError, and the call never ran."""
    ran: list[int] = []
    env.store.close()
    with pytest.raises(StoreClosedError):
        env.store.run_at_once([lambda: ran.append(1)])
    assert [] == ran


def test_memory_stores_run_calls_at_once_too(tmp_path: Path) -> None:
    """ ":memory:": the calls share one COMMIT, and reads inside see the writes before them."""
    store = Store(":memory:")
    try:
        commits = Commits(store)
        made = _results(
            store.run_at_once(
                [
                    lambda: store.create_credential("instance", "one"),
                    lambda: store.create_credential("instance", "two"),
                    lambda: [c.name for c in store.list_credentials()],
                ]
            )
        )
        assert ["one", "two"] == made[2]
        assert 1 == commits.n
    finally:
        store.close()
