"""Many requests read at once for a batched wait (API 1.2), on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from approval_guard.provider import PostgresStore, Store, StoreProtocol

REFUND = {"payment_id": "p_1", "amount": 4900, "currency": "GBP"}


class Clock:
    """A settable provider clock."""

    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite-file", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StoreProtocol, Clock]]:
    clock = Clock()
    store: StoreProtocol
    if request.param == "postgres":
        store = PostgresStore(request.getfixturevalue("pg_schema_dsn"), clock=clock)
    else:
        store = Store(str(tmp_path / "a.sqlite3"), clock=clock)
    yield store, clock
    store.close()


def _people(store: StoreProtocol) -> tuple[Any, Any]:
    instance = store.authenticate(store.create_credential("instance", "agent"))
    reviewer = store.authenticate(store.create_credential("reviewer", "alice"))
    assert instance is not None and reviewer is not None
    return instance, reviewer


def _new(store: StoreProtocol, owner: Any, key: str, seconds: int = 1800) -> Any:
    return store.create_request(
        owner=owner, idempotency_key=key, tool="t", arguments=REFUND, timeout_seconds=seconds
    ).request


def test_states_of_many_only_the_owners(opened: tuple[StoreProtocol, Clock]) -> None:
    """Each found id's state; another owner's and unknown ids are simply absent."""
    store, _ = opened
    instance, reviewer = _people(store)
    other = store.authenticate(store.create_credential("instance", "other"))
    assert other is not None
    mine = [_new(store, instance, f"k{n}") for n in range(3)]
    theirs = _new(store, other, "x")
    store.decide(mine[1].id, reviewer=reviewer, status="denied", note="no")
    ids = [*(r.id for r in mine), theirs.id, "no-such-id"]
    states = store.wait_states(ids, owner_id=instance.id)
    assert {r.id: s for r, s in zip(mine, ["pending", "denied", "pending"], strict=True)} == {
        rid: state.status for rid, state in states.items()
    }
    assert mine[0].deadline_at == states[mine[0].id].deadline_at
    assert {theirs.id} == set(store.wait_states(ids, owner_id=other.id))
    assert 5 - 1 == len(store.wait_states(ids, owner_id=None))


def test_overdue_ones_are_expired_first(opened: tuple[StoreProtocol, Clock]) -> None:
    """A pending request past its deadline is read expired, with its expiry written once."""
    store, clock = opened
    instance, _ = _people(store)
    short, long = _new(store, instance, "a", 60), _new(store, instance, "b")
    clock.now += timedelta(seconds=61)
    assert "expired" == store.wait_states([short.id, long.id], owner_id=None)[short.id].status
    got = store.get_requests([short.id, long.id], owner_id=instance.id)
    assert ["expired", "pending"] == [got[short.id].status, got[long.id].status]
    history = store.history(short.id)
    assert history is not None and 1 == [e.type for e in history.events].count("expired")


def test_whole_requests_as_one_read_gives_them(opened: tuple[StoreProtocol, Clock]) -> None:
    """get_requests gives what get_request gives, for each id found."""
    store, _ = opened
    instance, reviewer = _people(store)
    made = [_new(store, instance, f"k{n}") for n in range(600)]  # over one statement's chunk
    store.decide(made[599].id, reviewer=reviewer, status="approved", valid_for=60)
    got = store.get_requests([r.id for r in made], owner_id=instance.id)
    assert 600 == len(got)
    assert store.get_request(made[599].id) == got[made[599].id]


def test_counting_a_poll_of_each(opened: tuple[StoreProtocol, Clock]) -> None:
    """count_poll counts one poll of each found request, in one write."""
    store, _ = opened
    instance, _ = _people(store)
    made = [_new(store, instance, f"k{n}") for n in range(2)]
    store.wait_states([r.id for r in made], owner_id=instance.id, count_poll=True)
    store.wait_states([made[0].id], owner_id=instance.id, count_poll=True)
    counts = []
    for r in made:
        history = store.history(r.id)
        assert history is not None
        counts.append(history.poll_count)
    assert [2, 1] == counts
