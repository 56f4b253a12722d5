"""Group commit on SQLite: writers queued on the lock share one transaction, answered after it.

Real files, real threads, real SQLite errors. A *gate* (``tests/support/group.py``)
is a write that holds the writer lock (and opens a batch) until the test has
queued the writers it wants in that batch; ``Commits`` counts the ``COMMIT``
statements the writer connection ran (SQLite's own trace callback).
"""

# Writers are lambdas binding their arguments as defaults, which mypy cannot infer.
# mypy: disable-error-code="misc"

# House style puts the expected value first; ruff's SIM300 wants it last.

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import median
from typing import Any

import pytest
import requests

from approval_guard.provider import Store
from approval_guard.provider.store import group_commit
from approval_guard.provider.store.models import NotPendingError, StoreClosedError
from approval_guard.provider.store.sqlite_group import CommitFailed
from tests.support.group import Boom, Gate, start_all, wait_for_waiters
from tests.support.group_env import GroupEnv
from tests.support.paths import REPO

ROOT = REPO


@pytest.fixture
def env(tmp_path: Path) -> Iterator[GroupEnv]:
    """A store under group commit on a SQLite file."""
    made = GroupEnv("sqlite", str(tmp_path / "group.sqlite3"))
    try:
        yield made
    finally:
        made.store.close()


class Commits:
    """Counts the COMMITs the store's writer connection runs."""

    def __init__(self, store: Store) -> None:
        self.n = 0
        store._db.set_trace_callback(self._seen)

    def _seen(self, sql: str) -> None:
        if sql.strip().upper() == "COMMIT":
            self.n += 1


# ---------------------------------------------------------------------- many writers


def test_concurrent_decisions_are_each_recorded_once_and_all_answered(env: GroupEnv) -> None:
    """16 threads race two verdicts on each of 120 requests: one wins each, every call answers."""
    ids = env.new(120)
    commits = Commits(env.store)
    seq = env.store.seq
    won: list[str] = []

    def verdicts(mine: list[str], status: str) -> list[Any]:
        out: list[Any] = []
        for request_id in mine:
            try:
                out.append(env.decide(request_id, status=status))
                won.append(request_id)
                # Answered only after the commit: another connection already sees it.
                assert status == env.status(request_id)
            except NotPendingError as lost:
                out.append(lost)
        return out

    calls: list[Callable[[], Any]] = []
    for t in range(8):
        mine = ids[t::8]
        calls.append(lambda mine=mine: verdicts(mine, "approved"))
        calls.append(lambda mine=mine: verdicts(list(reversed(mine)), "denied"))
    results = start_all(calls)()

    assert [] == [r for r in results if isinstance(r, BaseException)]
    assert 240 == sum(len(r) for r in results)
    assert sorted(ids) == sorted(won)
    assert {1} == {env.decided_events(request_id) for request_id in ids}
    assert 120 == len(env.committed("SELECT 1 FROM requests WHERE status != 'pending'"))
    assert seq + 120 == env.store.seq
    assert commits.n <= 240


def test_writers_queued_on_the_lock_share_one_commit(env: GroupEnv) -> None:
    """A gate holds the lock while 12 deciders queue: one COMMIT answers all 13 writes.

    The change feed (subscribers, long polls) hears of them only once committed.
    """
    ids = env.new(12)
    heard: list[tuple[str, str]] = []
    env.store.subscribe(
        lambda seq, request_ids: heard.extend((r, env.status(r)) for r in request_ids)
    )
    polls = start_all(
        [lambda rid=rid: env.store.poll(rid, viewer=env.owner, wait=20) for rid in ids[:3]]
    )
    assert env.store.wait_for_waiting_polls(3, 10)
    commits = Commits(env.store)
    gate = Gate(env.store)
    join = start_all([lambda rid=rid: env.decide(rid) for rid in ids])
    gate.open_when(12)
    assert ["approved"] * 12 == join()
    assert ["ok"] == gate.out
    assert 1 == commits.n
    assert {"approved"} == {env.status(rid) for rid in ids}
    assert sorted((rid, "approved") for rid in ids) == sorted(heard)
    assert ["approved"] * 3 == [polled.status for polled in polls()]


def test_a_batch_is_committed_at_its_size_limit(env: GroupEnv, monkeypatch: Any) -> None:
    """With the limit at 4, a gate and 9 queued writers commit as 4 + 4 + 2."""
    monkeypatch.setattr(group_commit, "BATCH_LIMIT", 4)
    ids = env.new(9)
    commits = Commits(env.store)
    gate = Gate(env.store)
    join = start_all([lambda rid=rid: env.decide(rid) for rid in ids])
    gate.open_when(9)
    assert ["approved"] * 9 == join()
    assert 3 == commits.n


# ---------------------------------------------------------------------- a member fails


def test_a_member_that_raises_rolls_back_alone(env: GroupEnv) -> None:
    """Its rows and its change vanish; the batch's other writes commit; it gets its own error."""
    ids = env.new(4)
    (victim,) = env.new(1)
    heard: list[str] = []
    env.store.subscribe(lambda seq, request_ids: heard.extend(request_ids))
    commits = Commits(env.store)
    seen_by_raiser: list[int] = []

    def raiser() -> None:
        try:
            with env.store._writing() as tx:
                tx.event(victim, "decided", env.store.now(), None, {})
                tx.execute("INSERT INTO meta (key, value) VALUES ('raiser', 'x')")
                raise Boom
        except Boom:
            # Raised only once the batch ended: the others are committed already.
            seen_by_raiser.append(
                len(env.committed("SELECT 1 FROM requests WHERE status = 'approved'"))
            )
            raise

    gate = Gate(env.store)
    join = start_all([raiser] + [lambda rid=rid: env.decide(rid) for rid in ids])
    gate.open_when(5)
    results = join()

    assert isinstance(results[0], Boom)
    assert ["approved"] * 4 == results[1:]
    assert [4] == seen_by_raiser
    assert ["ok"] == gate.out
    assert 1 == commits.n
    assert [] == env.committed("SELECT 1 FROM meta WHERE key = 'raiser'")
    assert 0 == env.decided_events(victim)
    assert "pending" == env.status(victim)
    assert victim not in heard
    assert set(ids) <= set(heard)


# ---------------------------------------------------------------------- the COMMIT fails


def test_a_lone_writers_failed_commit_is_rolled_back(env: GroupEnv) -> None:
    """Without a batch too: CommitFailed, nothing kept, and the store goes on writing."""
    env.poison()
    first, second = env.new(2)
    with pytest.raises(CommitFailed) as failed:
        env.decide(first, "poison")
    assert "FOREIGN KEY" in str(failed.value.__cause__)
    assert "pending" == env.status(first)
    assert "approved" == env.decide(second)
    assert "approved" == env.decide(first)


def test_transaction_rolls_back_a_failed_commit(env: GroupEnv) -> None:
    """The public transaction() leaves no transaction open when its COMMIT fails."""
    env.poison()
    with pytest.raises(sqlite3.IntegrityError), env.store.transaction() as db:
        db.execute("INSERT INTO poison VALUES (7)")
    (request_id,) = env.new(1)
    assert "approved" == env.decide(request_id)


# ---------------------------------------------------------------------- others on the lock


def test_transaction_never_begins_inside_an_open_batch(env: GroupEnv) -> None:
    """A transaction() queued among a batch's writers commits the batch, then has its own."""
    ids = env.new(6)

    def extension() -> str:
        with env.store.transaction() as db:
            db.execute("INSERT INTO meta (key, value) VALUES ('extension', 'x')")
        return "ok"

    gate = Gate(env.store)
    calls: list[Callable[[], Any]] = [lambda rid=rid: env.decide(rid) for rid in ids]
    join = start_all([*calls[:3], extension, *calls[3:]])
    gate.open_when(7)
    assert ["approved"] * 3 + ["ok"] + ["approved"] * 3 == join()
    assert [("x",)] == env.committed("SELECT value FROM meta WHERE key = 'extension'")
    assert {"approved"} == {env.status(rid) for rid in ids}


def test_a_write_inside_a_write_is_refused_and_the_lock_is_not_leaked(env: GroupEnv) -> None:
    """transaction() (or another write) inside a write's body: RuntimeError, the outer undone."""
    (request_id,) = env.new(1)
    with pytest.raises(RuntimeError), env.store._writing() as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('outer', 'x')")
        with env.store.transaction():
            pass  # pragma: no cover - refused
    assert [] == env.committed("SELECT 1 FROM meta WHERE key = 'outer'")
    join = start_all([lambda: env.decide(request_id)])
    assert ["approved"] == join()


def test_a_lone_writer_commits_at_once(env: GroupEnv) -> None:
    """Nobody waiting: each write is its own COMMIT, with no added wait (a generous bound)."""
    ids = env.new(60)
    commits = Commits(env.store)
    took = []
    for request_id in ids:
        started = time.perf_counter()
        env.decide(request_id)
        took.append(time.perf_counter() - started)
    assert 60 == commits.n
    assert median(took) < 0.05
    assert max(took) < 2.0


def test_memory_stores_never_group(tmp_path: Path) -> None:
    """ ":memory:" readers share the writer connection, so each write commits by itself."""
    store = Store(":memory:")
    try:
        commits = Commits(store)
        gate = Gate(store)
        join = start_all([lambda: store.create_credential("instance", "agent")] * 4)
        gate.open_when(4)
        assert 4 == len({token for token in join() if isinstance(token, str)})
        assert 5 == commits.n
    finally:
        store.close()


def test_two_stores_on_one_file_each_batch_and_lose_nothing(env: GroupEnv) -> None:
    """Two stores on one file (as two processes): BEGIN IMMEDIATE serialises their batches."""
    other = Store(env.where)
    try:
        ids = env.new(80)
        halves = {0: env.store, 1: other}

        def run(store: Store, mine: list[str]) -> int:
            for request_id in mine:
                store.decide(request_id, reviewer=env.reviewer, status="approved")
            return len(mine)

        join = start_all([lambda t=t: run(halves[t % 2], ids[t::8]) for t in range(8)])
        assert 80 == sum(join())
        assert {1} == {env.decided_events(rid) for rid in ids}
    finally:
        other.close()


# ---------------------------------------------------------------------- SIGKILL


def _provider(db: Path) -> tuple[subprocess.Popen[str], str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.Popen(
        [sys.executable, "-m", "approval_guard.provider.serving.process", "--db", str(db),
         "--port", "0"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["url"]


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [200, 320], ids=["mid-burst", "right-after"])
def test_sigkill_in_a_burst_loses_no_answered_decision(tmp_path: Path, kill_at: int) -> None:
    """16 reviewer threads over HTTP, SIGKILL at the 200th or last 200: every one is on disk."""
    db = tmp_path / "burst.sqlite3"
    store = Store(str(db))
    instance = store.create_credential("instance", "agent")
    reviewer = store.create_credential("reviewer", "alice")
    store.close()
    proc, url = _provider(db)
    try:
        with requests.Session() as http:
            ids = [
                http.post(
                    f"{url}/v1/requests",
                    json={"tool": "issue_refund", "arguments": {"i": i}, "timeout": "30m"},
                    headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": f"k{i}"},
                    timeout=10,
                ).json()["id"]
                for i in range(320)
            ]
        acked: list[str] = []

        def decide_all(mine: list[str]) -> None:
            with requests.Session() as http:
                for request_id in mine:
                    try:
                        answer = http.post(
                            f"{url}/v1/requests/{request_id}/decision",
                            json={"status": "approved"},
                            headers={"Authorization": f"Bearer {reviewer}"},
                            timeout=10,
                        )
                    except requests.ConnectionError:
                        return  # killed
                    if answer.status_code == 200:
                        acked.append(request_id)
                    if len(acked) >= kill_at and proc.poll() is None:
                        os.kill(proc.pid, signal.SIGKILL)

        start_all([lambda t=t: decide_all(ids[t::16]) for t in range(16)])()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()
    assert len(acked) >= kill_at
    with contextlib.closing(sqlite3.connect(db)) as conn:
        statuses = dict(conn.execute("SELECT id, status FROM requests").fetchall())
    assert [] == [rid for rid in acked if statuses.get(rid) != "approved"]


# ------------------------------------------------------------------ on both backends


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GroupEnv]:
    """A store under group commit on SQLite (a file) and on PostgreSQL (a schema of its own)."""
    if request.param == "postgres":
        made = GroupEnv("postgres", request.getfixturevalue("pg_schema_dsn"))
    else:
        made = GroupEnv("sqlite", str(tmp_path / "group.sqlite3"))
    try:
        yield made
    finally:
        made.store.close()


def test_eight_deciders_on_one_request_in_one_batch_one_wins(both: GroupEnv) -> None:
    """In one batch the first decision holds; the others see it and get NotPendingError."""
    (request_id,) = both.new(1)
    gate = Gate(both.store)
    join = start_all([lambda: both.decide(request_id) for _ in range(8)])
    gate.open_when(8)
    results = join()
    assert 1 == results.count("approved")
    assert 7 == sum(isinstance(r, NotPendingError) for r in results)
    assert 1 == both.decided_events(request_id)


def test_the_opener_that_raises_rolls_back_alone(both: GroupEnv) -> None:
    """The batch's first writer fails after others queued: they begin a batch of their own."""
    ids = both.new(5)

    def fail(tx: Any) -> None:
        raise Boom

    gate = Gate(both.store, body=fail)
    join = start_all([lambda rid=rid: both.decide(rid) for rid in ids])
    gate.open_when(5)
    assert ["approved"] * 5 == join()
    assert 1 == len(gate.out) and isinstance(gate.out[0], Boom)
    assert [] == both.committed("SELECT 1 FROM meta WHERE key = ?", (gate.key,))


def test_a_failed_commit_fails_every_member_and_the_next_batch_starts_clean(
    both: GroupEnv,
) -> None:
    """One member's write makes the COMMIT fail: all of them get CommitFailed, none is kept."""
    refusal = both.poison()
    ids = both.new(6)
    heard: list[str] = []
    both.store.subscribe(lambda seq, request_ids: heard.extend(request_ids))
    seq = both.store.seq
    notes = [None, None, "poison", None, None]
    gate = Gate(both.store)
    join = start_all(
        [lambda rid=rid, n=n: both.decide(rid, n) for rid, n in zip(ids, notes, strict=False)]
    )
    gate.open_when(5)
    results = join()

    assert all(isinstance(r, group_commit.CommitFailed) for r in results)
    assert all(isinstance(r.__cause__, refusal) for r in results)
    assert 1 == len(gate.out) and isinstance(gate.out[0], group_commit.CommitFailed)
    assert {"pending"} == {both.status(rid) for rid in ids[:5]}
    assert [] == both.committed("SELECT 1 FROM meta WHERE key = ?", (gate.key,))
    assert [] == both.committed("SELECT 1 FROM poison")
    assert [] == heard and seq == both.store.seq
    # Rolled back: the next writer begins a new transaction, and it commits.
    assert not both.in_transaction()
    assert "approved" == both.decide(ids[5])
    assert "approved" == both.status(ids[5])
    assert [ids[5]] == heard


def test_close_commits_the_open_batch(both: GroupEnv) -> None:
    """close() queued among a batch's writers commits it; each writer is kept or told it closed."""
    ids = both.new(8)
    gate = Gate(both.store)
    join = start_all([lambda rid=rid: both.decide(rid) for rid in ids[:4]])
    gate.wait_for(4)
    closing = start_all([both.store.close])
    later = start_all([lambda rid=rid: both.decide(rid) for rid in ids[4:]])
    gate.open_when(9)
    results = join() + later()
    assert [None] == closing()
    assert ["ok"] == gate.out
    assert [(gate.key,)] == both.committed("SELECT key FROM meta WHERE key = ?", (gate.key,))
    for request_id, result in zip(ids, results, strict=True):
        assert result == "approved" or isinstance(result, StoreClosedError), result
        assert ("approved" if result == "approved" else "pending") == both.status(request_id)
    wait_for_waiters(both.store, 0)
