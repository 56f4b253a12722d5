"""Group commit on PostgreSQL: writers queued on a store's writer share one transaction.

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
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from approval_guard.provider import PostgresStore
from approval_guard.provider.store.group_commit import BATCH_LIMIT, Batch, CommitFailed
from approval_guard.provider.store.models import Credential, NotPendingError, StoreClosedError
from approval_guard.provider.store.pg_group import PostgresTransactions, RolledBack
from approval_guard.provider.store.pg_listen import parse
from tests.support.group import Boom, Gate, start_all, wait_for_waiters

pytestmark = pytest.mark.postgres


class Env:
    """A PostgreSQL store on a schema of its own, its two credentials, and committed reads."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.store = PostgresStore(dsn)
        owner = self.store.authenticate(self.store.create_credential("instance", "agent"))
        reviewer = self.store.authenticate(self.store.create_credential("reviewer", "alice"))
        assert owner is not None and reviewer is not None
        self.owner: Credential = owner
        self.reviewer: Credential = reviewer

    def new(self, n: int) -> list[str]:
        return [
            self.store.create_request(
                owner=self.owner,
                idempotency_key=str(uuid.uuid4()),
                tool="issue_refund",
                arguments={"i": i},
                timeout_seconds=600,
            ).request.id
            for i in range(n)
        ]

    def decide(self, request_id: str, note: str | None = None) -> str:
        done = self.store.decide(request_id, reviewer=self.reviewer, status="approved", note=note)
        assert done is not None
        return done.status

    def committed(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """What another session sees: committed rows only."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def status(self, request_id: str) -> str:
        rows = self.committed("SELECT status FROM ag_requests WHERE id = %s", (request_id,))
        return str(rows[0][0])

    def events(self, request_id: str, kind: str = "decided") -> int:
        rows = self.committed(
            "SELECT count(*) FROM ag_events WHERE request_id = %s AND type = %s",
            (request_id, kind),
        )
        return int(rows[0][0])


@pytest.fixture
def env(pg_schema_dsn: str) -> Iterator[Env]:
    made = Env(pg_schema_dsn)
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


def answered_after_commit(env: Env, request_id: str) -> str:
    """Decide; once answered, another session must already see the decision."""
    status = env.decide(request_id)
    assert status == env.status(request_id)
    return status


# ---------------------------------------------------------------------- one batch


def test_writers_queued_on_the_writer_share_one_commit_and_one_notify(env: Env) -> None:
    """A gate and 12 queued deciders: one COMMIT, each answered after it, one NOTIFY for all.

    The store's own feed and another instance's hear of the decisions only once committed.
    """
    ids = env.new(12)
    other = PostgresStore(env.dsn)
    heard: list[tuple[str, str]] = []
    heard_there: list[tuple[str, str]] = []
    env.store.subscribe(lambda seq, rids: heard.extend((r, env.status(r)) for r in rids))
    other.subscribe(lambda seq, rids: heard_there.extend((r, env.status(r)) for r in rids))
    with psycopg.connect(env.dsn, autocommit=True) as listening:
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


def test_eight_deciders_on_one_request_in_one_batch_one_wins(env: Env) -> None:
    """In one batch the first decision holds; the others see it and get NotPendingError."""
    (request_id,) = env.new(1)
    gate = Gate(env.store)
    join = start_all([lambda: env.decide(request_id) for _ in range(8)])
    gate.open_when(8)
    results = join()
    assert 1 == results.count("approved")
    assert 7 == sum(isinstance(r, NotPendingError) for r in results)
    assert 1 == env.events(request_id)


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
    env: Env, fail: Callable[[Any], None], error: type[BaseException]
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
    assert [] == env.committed("SELECT 1 FROM ag_meta WHERE key = 'member'")
    assert [(gate.key,)] == env.committed("SELECT key FROM ag_meta WHERE key = %s", (gate.key,))
    assert 0 == env.events(victim)
    assert victim not in heard
    assert set(ids) <= set(heard)
    assert "approved" == env.decide(victim)


def test_the_opener_that_fails_rolls_back_alone(env: Env) -> None:
    """The batch's first writer fails after others queued: they begin a batch of their own."""
    ids = env.new(5)
    gate = Gate(env.store, body=_fail_in_a_statement)
    join = start_all([lambda rid=rid: env.decide(rid) for rid in ids])
    gate.open_when(5)
    assert ["approved"] * 5 == join()
    assert 1 == len(gate.out) and isinstance(gate.out[0], psycopg.errors.DivisionByZero)
    assert [] == env.committed("SELECT 1 FROM ag_meta WHERE key = %s", (gate.key,))


def test_a_full_batchs_kept_savepoints_nest_and_a_late_failure_undoes_only_its_own(
    env: Env,
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
    kept = env.committed("SELECT key FROM ag_meta WHERE key LIKE 'm%%' OR key = 'last'")
    assert {f"m{n}" for n in range(BATCH_LIMIT - 1)} == {key for (key,) in kept}


# ---------------------------------------------------------------------- the COMMIT fails


def poison(env: Env) -> None:
    """A decision noted 'poison' breaks a deferred foreign key: PostgreSQL refuses the COMMIT."""
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE poison_parent (id integer PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE poison (parent integer "
            "REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED)"
        )
        conn.execute(
            "CREATE FUNCTION poison_note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.decision_note = 'poison' THEN INSERT INTO poison VALUES (42); END IF; "
            "RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER poison_note AFTER UPDATE ON ag_requests "
            "FOR EACH ROW EXECUTE FUNCTION poison_note()"
        )


def test_a_failed_commit_fails_every_member_and_the_next_batch_starts_clean(env: Env) -> None:
    """One member's write makes the COMMIT fail: all of them get CommitFailed, none is kept."""
    poison(env)
    ids = env.new(6)
    heard: list[str] = []
    env.store.subscribe(lambda seq, request_ids: heard.extend(request_ids))
    seq = env.store.seq
    notes = [None, None, "poison", None, None]
    gate = Gate(env.store)
    join = start_all(
        [lambda rid=rid, n=n: env.decide(rid, n) for rid, n in zip(ids, notes, strict=False)]
    )
    gate.open_when(5)
    results = join()

    assert 5 * [CommitFailed] == [type(r) for r in results]
    assert all(isinstance(r.__cause__, psycopg.errors.ForeignKeyViolation) for r in results)
    assert 1 == len(gate.out) and isinstance(gate.out[0], CommitFailed)
    assert {"pending"} == {env.status(rid) for rid in ids[:5]}
    assert [] == env.committed("SELECT 1 FROM ag_meta WHERE key = %s", (gate.key,))
    assert [] == env.committed("SELECT 1 FROM poison")
    assert [] == heard and seq == env.store.seq
    assert not env.store._writer.in_transaction
    assert "approved" == env.decide(ids[5])
    assert [ids[5]] == heard


def _swallow_a_failed_statement(tx: Any) -> None:
    # A careless body: PostgreSQL would now answer COMMIT with ROLLBACK.
    with contextlib.suppress(psycopg.errors.DivisionByZero):
        tx.execute("SELECT 1 / 0")


def test_a_lone_write_postgres_would_roll_back_is_not_answered_as_kept(env: Env) -> None:
    """A body that swallowed a failed statement: CommitFailed, never a silent ROLLBACK."""
    with pytest.raises(CommitFailed) as failed, env.store._writing() as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('swallowed', 'x')")
        _swallow_a_failed_statement(tx)
    assert isinstance(failed.value.__cause__, RolledBack)
    assert [] == env.committed("SELECT 1 FROM ag_meta WHERE key = 'swallowed'")
    (request_id,) = env.new(1)
    assert "approved" == env.decide(request_id)


def test_a_member_that_swallowed_a_failed_statement_fails_the_whole_batch(env: Env) -> None:
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
    assert [] == env.committed("SELECT 1 FROM ag_meta WHERE key IN ('careless', %s)", (gate.key,))


def test_a_lost_connection_fails_every_member_of_its_batch(env: Env) -> None:
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
    env.committed("SELECT pg_terminate_backend(%s)", (pid,))
    go_on.set()
    results = join()
    gate.thread.join(20)

    assert isinstance(results[0], CommitFailed)
    assert isinstance(gate.out[0], CommitFailed)
    for request_id, result in zip(ids, results[1:], strict=True):
        assert result == "approved" or isinstance(result, CommitFailed), result
        assert ("approved" if result == "approved" else "pending") == env.status(request_id)
    assert [] == env.committed("SELECT 1 FROM ag_meta WHERE key IN ('holder', %s)", (gate.key,))
    for request_id in ids:
        if env.status(request_id) == "pending":
            assert "approved" == env.decide(request_id)
    assert pid not in {conn.info.backend_pid for conn in env.store._idle.queue}


# ---------------------------------------------------------------------- closing


def test_close_commits_the_open_batch(env: Env) -> None:
    """close() queued among a batch's writers commits it; each writer is kept or told it closed."""
    ids = env.new(8)
    gate = Gate(env.store)
    join = start_all([lambda rid=rid: env.decide(rid) for rid in ids[:4]])
    gate.wait_for(4)
    closing = start_all([env.store.close])
    later = start_all([lambda rid=rid: env.decide(rid) for rid in ids[4:]])
    gate.open_when(9)
    results = join() + later()
    assert [None] == closing()
    assert ["ok"] == gate.out
    assert [(gate.key,)] == env.committed("SELECT key FROM ag_meta WHERE key = %s", (gate.key,))
    for request_id, result in zip(ids, results, strict=True):
        assert result == "approved" or isinstance(result, StoreClosedError), result
        assert ("approved" if result == "approved" else "pending") == env.status(request_id)
    assert env.store._writer.conn is None
    wait_for_waiters(env.store, 0)


def test_a_pooled_connection_found_lost_at_begin_is_dropped_and_another_taken(env: Env) -> None:
    """Its backend gone while it sat in the pool: the batch begins on the next one, nothing lost."""
    lost, good = env.store._connect(), env.store._connect()
    env.committed("SELECT pg_terminate_backend(%s)", (lost.info.backend_pid,))
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
    assert [("x",)] == env.committed("SELECT value FROM ag_meta WHERE key = 'after-loss'")
