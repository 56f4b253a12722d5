"""Group commit as only PostgreSQL does it (store/pg_group.py): savepoints, NOTIFY, lost links.

Real PostgreSQL, real threads, real server errors. A *gate*
(``tests/support/group.py``) holds the writer lock and an open batch until the
test has queued the writers it wants in it. What other sessions see is read
on a connection of the test's own, so only committed rows count.
"""

# Writers are lambdas binding their arguments as defaults, which mypy cannot infer.
# mypy: disable-error-code="misc"

# House style puts the expected value first; ruff's SIM300 wants it last.

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from approval_guard.provider import PostgresStore
from approval_guard.provider.store.group_commit import BATCH_LIMIT, Batch, CommitFailed
from approval_guard.provider.store.pg_group import PostgresTransactions, RolledBack
from approval_guard.provider.store.pg_listen import parse
from tests.support.group import Boom, Gate, start_all
from tests.support.group_env import GroupEnv

pytestmark = pytest.mark.postgres


@pytest.fixture
def env(pg_schema_dsn: str) -> Iterator[GroupEnv]:
    """A store under group commit on PostgreSQL, in a schema of its own."""
    made = GroupEnv("postgres", pg_schema_dsn)
    try:
        yield made
    finally:
        made.store.close()


class Commits:
    """Counts the batches the store's writer committed (its COMMITs that said COMMIT)."""

    def __init__(self, store: PostgresStore) -> None:
        self.n = 0
        real = store._writer.commit

        def counted(batch: Batch) -> None:
            real(batch)
            self.n += 1

        store._writer.commit = counted  # type: ignore[method-assign]


def answered_after_commit(env: GroupEnv, request_id: str) -> str:
    """Decide; once answered, another session must already see the decision."""
    status = env.decide(request_id)
    assert status == env.status(request_id)
    return status


# ---------------------------------------------------------------------- one batch


def test_writers_queued_on_the_writer_share_one_commit_and_one_notify(env: GroupEnv) -> None:
    """A gate and 12 queued deciders: one COMMIT, each answered after it, one NOTIFY for all.

    The store's own feed and another instance's hear of the decisions only once committed.
    """
    ids = env.new(12)
    other = PostgresStore(env.where)
    heard: list[tuple[str, str]] = []
    heard_there: list[tuple[str, str]] = []
    env.store.subscribe(lambda seq, rids: heard.extend((r, env.status(r)) for r in rids))
    other.subscribe(lambda seq, rids: heard_there.extend((r, env.status(r)) for r in rids))
    with psycopg.connect(env.where, autocommit=True) as listening:
        listening.execute(f'LISTEN "{env.store._channel}"')
        commits = Commits(env.store)
        gate = Gate(env.store)
        join = start_all([lambda rid=rid: answered_after_commit(env, rid) for rid in ids])
        gate.open_when(12)
        assert ["approved"] * 12 == join()
        notes = [parse(note.payload) for note in listening.notifies(timeout=1.0)]
    try:
        assert ["ok"] == gate.out
        assert 1 == commits.n
        assert 1 == len(notes)
        instance, seq, request_ids = notes[0] or ("", 0, ())
        assert (env.store._instance, env.store.seq) == (instance, seq)
        assert sorted(ids) == sorted(request_ids)
        assert sorted((rid, "approved") for rid in ids) == sorted(heard)
        assert other.wait_for_change(after=seq - 1, timeout=5) >= seq
        assert sorted((rid, "approved") for rid in ids) == sorted(heard_there)
    finally:
        other.close()


# ---------------------------------------------------------------------- a member fails


def _fail_by_raising(tx: Any) -> None:
    raise Boom


def _fail_in_a_statement(tx: Any) -> None:
    tx.execute("SELECT 1 / 0")  # the connection is INERROR until the savepoint's rollback


@pytest.mark.parametrize(
    ("fail", "error"),
    [(_fail_by_raising, Boom), (_fail_in_a_statement, psycopg.errors.DivisionByZero)],
    ids=["raises", "statement-fails"],
)
def test_a_member_that_fails_rolls_back_alone(
    env: GroupEnv, fail: Callable[[Any], None], error: type[BaseException]
) -> None:
    """Its rows and its change vanish; the batch's other writes commit; it gets its own error."""
    ids = env.new(4)
    (victim,) = env.new(1)
    heard: list[str] = []
    env.store.subscribe(lambda seq, request_ids: heard.extend(request_ids))
    commits = Commits(env.store)

    def member() -> None:
        with env.store._writing() as tx:
            tx.lock("request:" + victim)
            tx.event(victim, "decided", env.store.now(), None, {})
            tx.execute("INSERT INTO meta (key, value) VALUES ('member', 'x')")
            fail(tx)

    gate = Gate(env.store)
    join = start_all([member] + [lambda rid=rid: env.decide(rid) for rid in ids])
    gate.open_when(5)
    results = join()

    assert isinstance(results[0], error)
    assert ["approved"] * 4 == results[1:]
    assert ["ok"] == gate.out
    assert 1 == commits.n
    assert [] == env.committed("SELECT 1 FROM meta WHERE key = 'member'")
    assert [(gate.key,)] == env.committed("SELECT key FROM meta WHERE key = ?", (gate.key,))
    assert 0 == env.decided_events(victim)
    assert victim not in heard
    assert set(ids) <= set(heard)
    assert "approved" == env.decide(victim)


def test_a_full_batchs_kept_savepoints_nest_and_a_late_failure_undoes_only_its_own(
    env: GroupEnv,
) -> None:
    """A batch of BATCH_LIMIT writes: the opener and 62 members kept, the last one undone."""
    conn = env.store._connect()
    writer = PostgresTransactions(lambda: conn, list[Any]().append, channel="c", instance="i")
    try:
        writer.begin()
        writer.conn.execute("INSERT INTO ag_meta (key, value) VALUES ('m0', 'x')")
        for n in range(1, BATCH_LIMIT - 1):
            writer.savepoint()
            writer.conn.execute("INSERT INTO ag_meta (key, value) VALUES (%s, 'x')", (f"m{n}",))
            writer.release()
        writer.savepoint()
        writer.conn.execute("INSERT INTO ag_meta (key, value) VALUES ('last', 'x')")
        with pytest.raises(psycopg.errors.DivisionByZero):
            writer.conn.execute("SELECT 1 / 0")
        assert writer.undo()
        writer.commit(Batch())
    finally:
        conn.close()
    kept = env.committed("SELECT key FROM meta WHERE key LIKE 'm%' OR key = 'last'")
    assert {f"m{n}" for n in range(BATCH_LIMIT - 1)} == {key for (key,) in kept}


# ---------------------------------------------------------------------- the COMMIT fails


def _swallow_a_failed_statement(tx: Any) -> None:
    # A careless body: PostgreSQL would now answer COMMIT with ROLLBACK.
    with contextlib.suppress(psycopg.errors.DivisionByZero):
        tx.execute("SELECT 1 / 0")


def test_a_lone_write_postgres_would_roll_back_is_not_answered_as_kept(env: GroupEnv) -> None:
    """A body that swallowed a failed statement: CommitFailed, never a silent ROLLBACK."""
    with pytest.raises(CommitFailed) as failed, env.store._writing() as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('swallowed', 'x')")
        _swallow_a_failed_statement(tx)
    assert isinstance(failed.value.__cause__, RolledBack)
    assert [] == env.committed("SELECT 1 FROM meta WHERE key = 'swallowed'")
    (request_id,) = env.new(1)
    assert "approved" == env.decide(request_id)


def test_a_member_that_swallowed_a_failed_statement_fails_the_whole_batch(env: GroupEnv) -> None:
    """Its savepoint cannot be released: every member gets CommitFailed, nothing is kept."""
    ids = env.new(4)

    def careless() -> None:
        with env.store._writing() as tx:
            tx.execute("INSERT INTO meta (key, value) VALUES ('careless', 'x')")
            _swallow_a_failed_statement(tx)

    gate = Gate(env.store)
    join = start_all([careless] + [lambda rid=rid: env.decide(rid) for rid in ids])
    gate.open_when(5)
    results = join()
    assert isinstance(results[0], CommitFailed)
    assert isinstance(gate.out[0], CommitFailed)
    # Those in the batch with it failed; any that came after began a batch of their own.
    for request_id, result in zip(ids, results[1:], strict=True):
        assert result == "approved" or isinstance(result, CommitFailed), result
        assert ("approved" if result == "approved" else "pending") == env.status(request_id)
    assert [] == env.committed("SELECT 1 FROM meta WHERE key IN ('careless', ?)", (gate.key,))


def test_a_lost_connection_fails_every_member_of_its_batch(env: GroupEnv) -> None:
    """The writer's backend is killed mid-batch: no member answered as kept; the next reconnects."""
    ids = env.new(6)
    inside = threading.Event()
    go_on = threading.Event()

    def holder() -> None:
        with env.store._writing() as tx:
            inside.set()
            assert go_on.wait(20)
            tx.execute("INSERT INTO meta (key, value) VALUES ('holder', 'x')")

    gate = Gate(env.store)
    join = start_all([holder] + [lambda rid=rid: env.decide(rid) for rid in ids])
    gate.wait_for(7)
    gate.go.set()  # the gate, like every member before the holder, waits for the batch's end
    assert inside.wait(20)
    pid = env.store._writer.conn.info.backend_pid
    env.committed("SELECT pg_terminate_backend(?)", (pid,))
    go_on.set()
    results = join()
    gate.thread.join(20)

    assert isinstance(results[0], CommitFailed)
    assert isinstance(gate.out[0], CommitFailed)
    for request_id, result in zip(ids, results[1:], strict=True):
        assert result == "approved" or isinstance(result, CommitFailed), result
        assert ("approved" if result == "approved" else "pending") == env.status(request_id)
    assert [] == env.committed("SELECT 1 FROM meta WHERE key IN ('holder', ?)", (gate.key,))
    for request_id in ids:
        if env.status(request_id) == "pending":
            assert "approved" == env.decide(request_id)
    assert pid not in {conn.info.backend_pid for conn in env.store._idle.queue}


# ---------------------------------------------------------------------- closing


def test_a_pooled_connection_found_lost_at_begin_is_dropped_and_another_taken(
    env: GroupEnv,
) -> None:
    """Its backend gone while it sat in the pool: the batch begins on the next one, nothing lost."""
    lost, good = env.store._connect(), env.store._connect()
    env.committed("SELECT pg_terminate_backend(?)", (lost.info.backend_pid,))
    pool, given_back = [lost, good], list[Any]()
    writer = PostgresTransactions(
        lambda: pool.pop(0), given_back.append, channel=env.store._channel, instance="i"
    )
    try:
        writer.begin()
        assert writer.conn is good
        writer.conn.execute("INSERT INTO ag_meta (key, value) VALUES ('after-loss', 'x')")
        writer.commit(Batch())
    finally:
        good.close()
    assert [lost, good] == given_back
    assert lost.broken
    assert [("x",)] == env.committed("SELECT value FROM meta WHERE key = 'after-loss'")
