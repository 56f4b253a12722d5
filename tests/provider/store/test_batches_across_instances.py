"""Batches of several PostgreSQL stores on one database: no deadlock, every change counted once.

Each store groups its own writers into batches; every batch takes one batch
lock first (``store/pg_group.py``), so batches of different instances, each
holding locks for unrelated requests, never wait on each other in a cycle,
and a quorum's approvals, decided on both at once, are counted exactly.
"""

# Writers are lambdas binding their arguments as defaults, which mypy cannot infer.
# mypy: disable-error-code="misc"

# House style puts the expected value first; ruff's SIM300 wants it last.

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from approval_guard.provider import PostgresStore
from approval_guard.provider.store.models import AlreadyApproved, Credential, NotPendingError
from tests.support.api import wait_for
from tests.support.group import Gate, start_all

pytestmark = pytest.mark.postgres

REQUIRED = 3
REVIEWERS = ("alice", "bob", "carol", "dave")


@pytest.fixture
def two(pg_schema_dsn: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores (as two instances) on one schema."""
    stores = (PostgresStore(pg_schema_dsn), PostgresStore(pg_schema_dsn))
    try:
        yield stores
    finally:
        for store in stores:
            store.close()


def committed(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def test_two_instances_deciding_and_creating_at_once_never_deadlock_and_count_exactly(
    two: tuple[PostgresStore, PostgresStore], pg_schema_dsn: str
) -> None:
    """Quorum approvals, raced creates and polls on both at once: each change counted once.

    Four reviewers approve each of 30 three-approval requests on both instances
    in shuffled orders (so two batches hold locks of unrelated requests in
    opposite orders), while both create requests, some on the same keys, and
    the instance polls; nothing fails, every request is approved by exactly
    three people and decided once, and each raced key made one request.
    """
    a, b = two
    owner = a.authenticate(a.create_credential("instance", "agent"))
    assert owner is not None
    reviewers: list[Credential] = []
    for name in REVIEWERS:
        found = a.authenticate(a.add_reviewer(name))
        assert found is not None
        reviewers.append(found)
    ids = [
        store.create_request(
            owner=owner,
            idempotency_key=f"quorum-{i}",
            tool="issue_refund",
            arguments={"i": i},
            timeout_seconds=600,
            approvals_required=REQUIRED,
        ).request.id
        for i, store in zip(range(30), [a, b] * 15, strict=True)
    ]
    keys = [f"raced-{i % 20}" for i in range(40)]  # every key twice: once on each instance

    def approve_all(store: PostgresStore, reviewer: Credential, seed: int) -> Counter[str]:
        mine = list(ids)
        random.Random(seed).shuffle(mine)
        out: Counter[str] = Counter()
        for request_id in mine:
            try:
                decided = store.decide(request_id, reviewer=reviewer, status="approved")
                assert decided is not None
                out[decided.status] += 1
            except (AlreadyApproved, NotPendingError) as refused:
                out[type(refused).__name__] += 1
        return out

    def create_all(store: PostgresStore, seed: int) -> list[tuple[str, str]]:
        mine = list(keys)
        random.Random(seed).shuffle(mine)
        made = []
        for key in mine:
            created = store.create_request(
                owner=owner,
                idempotency_key=key,
                tool="issue_refund",
                arguments={"key": key},
                timeout_seconds=600,
            )
            made.append((key, created.request.id))
        return made

    def poll_all(store: PostgresStore, seed: int) -> int:
        mine = list(ids)
        random.Random(seed).shuffle(mine)
        for request_id in mine:
            assert store.poll(request_id, viewer=owner) is not None
        return len(mine)

    calls: list[Callable[[], Any]] = []
    for n, reviewer in enumerate(reviewers):
        calls.append(lambda r=reviewer, n=n: approve_all(a, r, n))
        calls.append(lambda r=reviewer, n=n: approve_all(b, r, 100 + n))
    calls += [lambda: create_all(a, 1), lambda: create_all(b, 2)]
    calls += [lambda: poll_all(a, 3), lambda: poll_all(b, 4)]
    results = start_all(calls)()

    assert [] == [r for r in results if isinstance(r, BaseException)]
    tally: Counter[str] = sum(results[: 2 * len(REVIEWERS)], Counter())
    # Each reviewer is counted once per request; their twin on the other instance is refused.
    assert 2 * 30 * len(REVIEWERS) == sum(tally.values())
    assert 30 == tally["approved"]
    assert 30 * (REQUIRED - 1) == tally["pending"]
    for request_id in ids:
        row = committed(
            pg_schema_dsn,
            "SELECT status, approval_list FROM ag_requests WHERE id = %s",
            (request_id,),
        )[0]
        assert "approved" == row[0]
        assert REQUIRED == row[1].count('"by"')
    events = Counter(
        (rid, kind)
        for rid, kind in committed(
            pg_schema_dsn,
            "SELECT request_id, type FROM ag_events WHERE request_id = ANY(%s)",
            (ids,),
        )
    )
    assert {1} == {events[(rid, "decided")] for rid in ids}
    assert {REQUIRED - 1} == {events[(rid, "approval")] for rid in ids}
    approvals = committed(
        pg_schema_dsn,
        "SELECT request_id, count(*) FROM ag_approvals WHERE request_id = ANY(%s) "
        "GROUP BY request_id",
        (ids,),
    )
    assert {REQUIRED} == {n for _, n in approvals} and 30 == len(approvals)
    made = {key: set() for key in keys}  # type: dict[str, set[str]]
    for key, request_id in results[-4] + results[-3]:
        made[key].add(request_id)
    assert {1} == {len(one) for one in made.values()}
    assert 30 + 20 == committed(pg_schema_dsn, "SELECT count(*) FROM ag_requests")[0][0]
    seq = committed(pg_schema_dsn, "SELECT seq FROM ag_seq")[0][0]
    assert seq == committed(pg_schema_dsn, "SELECT count(*) FROM ag_events")[0][0]


def test_a_store_opening_while_a_batch_holds_table_locks_waits_for_it(
    two: tuple[PostgresStore, PostgresStore], pg_schema_dsn: str
) -> None:
    """A new instance's table creation waits for an open batch, then both go on.

    The batch has written an audit row when the new store starts creating its
    tables, and then updates a request. The table creation locks
    ``ag_requests`` before it reaches ``ag_audit``: were it not to take the
    batch lock first, as a batch does, each would wait for the other.
    """
    a, _ = two
    owner = a.authenticate(a.create_credential("instance", "agent"))
    assert owner is not None
    request_id = a.create_request(
        owner=owner,
        idempotency_key=str(uuid.uuid4()),
        tool="issue_refund",
        arguments={},
        timeout_seconds=600,
    ).request.id
    opening: list[Callable[[], list[Any]]] = []

    def body(tx: Any) -> None:
        tx.execute(
            "INSERT INTO audit (at, actor, source, action, detail) "
            "VALUES (0, 'test', 'test', 'test', '{}')"
        )
        opening.append(start_all([lambda: PostgresStore(pg_schema_dsn)]))
        wait_for(
            lambda: committed(
                pg_schema_dsn,
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()",
            ),
            timeout=20,
            what="the new store never waited for the batch",
        )
        tx.execute("UPDATE requests SET poll_count = 7 WHERE id = ?", (request_id,))

    gate = Gate(a, body=body)
    gate.open_when(0)
    (opened,) = opening[0]()
    try:
        assert ["ok"] == gate.out
        assert isinstance(opened, PostgresStore), opened
        assert [(7,)] == committed(
            pg_schema_dsn, "SELECT poll_count FROM ag_requests WHERE id = %s", (request_id,)
        )
    finally:
        if isinstance(opened, PostgresStore):
            opened.close()
