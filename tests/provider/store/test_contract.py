"""One store contract, run against every backend: SQLite (file and memory) and PostgreSQL.

The HTTP layer only ever talks to a :class:`StoreProtocol`; each behaviour it
relies on is checked here once per backend, and the cross-instance ones on
two PostgreSQL stores sharing one database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from approval_guard.provider import (
    IdempotencyKeyReused,
    NotPendingError,
    PostgresStore,
    Store,
    StoreClosedError,
    StoreProtocol,
)
from approval_guard.provider.store.models import InvalidEdit
from tests.support.api import wait_for

REFUND = {"payment_id": "p_1", "amount": 4900, "currency": "GBP"}


class Clock:
    """A settable provider clock."""

    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now


Opener = Callable[[], StoreProtocol]


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Opener, Clock]]:
    clock = Clock()
    opened: list[StoreProtocol] = []
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_schema_dsn")

        def make() -> StoreProtocol:
            opened.append(PostgresStore(dsn, clock=clock))
            return opened[-1]
    elif request.param == "sqlite-file":

        def make() -> StoreProtocol:
            opened.append(Store(str(tmp_path / "a.sqlite3"), clock=clock))
            return opened[-1]
    else:
        memory = Store(":memory:", clock=clock)

        def make() -> StoreProtocol:
            return memory

        opened.append(memory)
    yield make, clock
    for store in opened:
        store.close()


@pytest.fixture
def store(opener: tuple[Opener, Clock]) -> StoreProtocol:
    return opener[0]()


def _people(store: StoreProtocol) -> tuple[Any, Any]:
    instance = store.authenticate(store.create_credential("instance", "agent"))
    reviewer = store.authenticate(store.create_credential("reviewer", "alice"))
    assert instance is not None and reviewer is not None
    return instance, reviewer


def _new(store: StoreProtocol, owner: Any, key: str = "k", **kw: Any) -> Any:
    kw.setdefault("timeout_seconds", 1800)
    return store.create_request(
        owner=owner, idempotency_key=key, tool="issue_refund", arguments=REFUND, **kw
    )


def test_credentials_are_hashed_authenticated_and_revoked(store: StoreProtocol) -> None:
    token = store.create_credential("reviewer", "bob")
    found = store.authenticate(token)
    assert found is not None and found.is_reviewer and "bob" == found.name
    assert store.authenticate(token + "x") is None
    assert token not in repr(store.list_credentials())
    assert store.revoke_credential(found.id)
    assert store.authenticate(token) is None
    assert not store.revoke_credential(found.id)


def test_first_start_makes_one_of_each_kind_once(store: StoreProtocol) -> None:
    tokens = store.ensure_initial_credentials()
    assert tokens is not None
    assert store.ensure_initial_credentials() is None
    assert {"instance", "reviewer"} == {c.kind for c in store.list_credentials()}


def test_sessions_belong_to_live_reviewers(store: StoreProtocol) -> None:
    _, reviewer = _people(store)
    session_id, _session = store.create_session(reviewer)
    assert store.session(session_id) is not None
    assert store.session(session_id + "x") is None
    store.revoke_credential(reviewer.id)
    assert store.session(session_id) is None


def test_create_replay_and_a_reused_key(store: StoreProtocol) -> None:
    instance, _ = _people(store)
    first = _new(store, instance)
    again = _new(store, instance)
    assert first.created and not again.created
    assert first.request.id == again.request.id
    with pytest.raises(IdempotencyKeyReused) as caught:
        store.create_request(
            owner=instance, idempotency_key="k", tool="other", arguments={}, timeout_seconds=60
        )
    assert caught.value.request is not None and first.request.id == caught.value.request.id
    assert 1 == len(store.list_requests())


def test_exact_numbers_and_editable_names_are_kept(store: StoreProtocol) -> None:
    instance, reviewer = _people(store)
    from approval_guard._codec.exact_json import load_json

    arguments = load_json('{"amount": 1e400, "big": 9007199254740993, "currency": "GBP"}')
    made = store.create_request(
        owner=instance,
        idempotency_key="n",
        tool="t",
        arguments=arguments,
        timeout_seconds=60,
        editable=["amount"],
    )
    got = store.get_request(made.request.id)
    assert got is not None and ("amount",) == got.editable
    assert arguments == got.arguments
    edited = {**arguments, "amount": 2500}
    decided = store.decide(got.id, reviewer=reviewer, status="approved", arguments=edited)
    assert decided is not None and decided.decision is not None
    assert edited == decided.decision.arguments
    with pytest.raises(InvalidEdit):
        other = _new(store, instance, key="e", editable=["amount"]).request
        store.decide(
            other.id, reviewer=reviewer, status="approved", arguments={**REFUND, "currency": "EUR"}
        )


def test_decide_once_then_not_pending(store: StoreProtocol) -> None:
    instance, reviewer = _people(store)
    request = _new(store, instance).request
    decided = store.decide(request.id, reviewer=reviewer, status="approved", valid_for=60)
    assert decided is not None and "approved" == decided.status
    assert decided.decision is not None and decided.decision.expires_at is not None
    with pytest.raises(NotPendingError):
        store.decide(request.id, reviewer=reviewer, status="denied")
    with pytest.raises(NotPendingError):
        store.cancel(request.id, owner=instance)
    assert store.decide("no-such-id", reviewer=reviewer, status="approved") is None


def test_cancel_is_idempotent_and_owner_only(store: StoreProtocol) -> None:
    instance, _ = _people(store)
    other = store.authenticate(store.create_credential("instance", "other"))
    assert other is not None
    request = _new(store, instance).request
    assert store.cancel(request.id, owner=other) is None
    cancelled = store.cancel(request.id, owner=instance, reason="gone")
    assert cancelled is not None and "cancelled" == cancelled.status
    assert cancelled == store.cancel(request.id, owner=instance)


def test_a_deadline_expires_once_with_one_event(opener: tuple[Opener, Clock]) -> None:
    store, clock = opener[0](), opener[1]
    instance, _ = _people(store)
    request = _new(store, instance, timeout_seconds=60).request
    clock.now += timedelta(seconds=61)
    assert store.expire_due() is None
    got = store.get_request(request.id)
    assert got is not None and "expired" == got.status
    history = store.history(request.id)
    assert history is not None
    assert 1 == [event.type for event in history.events].count("expired")


def test_poll_wait_is_woken_by_a_decision(store: StoreProtocol) -> None:
    instance, reviewer = _people(store)
    request = _new(store, instance).request
    out: list[Any] = []
    thread = threading.Thread(
        target=lambda: out.append(store.poll(request.id, viewer=instance, wait=10))
    )
    thread.start()
    assert store._feed.wait_for_waiting(1, timeout=5)  # type: ignore[attr-defined]
    decided_at = time.monotonic()
    store.decide(request.id, reviewer=reviewer, status="denied", note="no")
    thread.join(5)
    assert "denied" == out[0].status
    assert time.monotonic() - decided_at < 2
    history = store.history(request.id)
    assert history is not None and 1 == history.poll_count


def test_list_pages_filters_and_annotations(store: StoreProtocol) -> None:
    instance, reviewer = _people(store)
    ids = [_new(store, instance, key=f"k{i}").request.id for i in range(5)]
    store.decide(ids[0], reviewer=reviewer, status="approved")
    newest_first = [r.id for r in store.list_requests()]
    assert list(reversed(ids)) == newest_first
    assert [ids[0]] == [r.id for r in store.list_requests(status="approved")]
    page = store.list_requests(limit=2, before=newest_first[1])
    assert newest_first[2:4] == [r.id for r in page]
    assert "alice" == store.annotations([ids[0]])[ids[0]].decided_by


def test_the_change_feed_and_subscribers(store: StoreProtocol) -> None:
    instance, reviewer = _people(store)
    seen: list[tuple[int, tuple[str, ...]]] = []
    unsubscribe = store.subscribe(lambda seq, ids: seen.append((seq, ids)))
    before = store.seq
    request = _new(store, instance).request
    assert store.wait_for_change(after=before, timeout=5) > before
    store.decide(request.id, reviewer=reviewer, status="approved")
    wait_for(lambda: len(seen) >= 2, timeout=5)
    assert [(request.id,), (request.id,)] == [ids for _, ids in seen[:2]]
    assert seen[0][0] < seen[1][0]
    unsubscribe()
    # A later subscriber is called in the same pass over the subscribers: once it
    # has heard of the next change, an unsubscribed one would have heard too.
    witness: list[int] = []
    store.subscribe(lambda seq, ids: witness.append(seq))
    _new(store, instance, key="later")
    wait_for(lambda: witness, timeout=5)
    assert 2 == len(seen)


def test_a_closed_store_refuses_work(store: StoreProtocol) -> None:
    store.close()
    with pytest.raises(StoreClosedError):
        store.create_credential("instance", "late")
    assert store.closed


# ----------------------------------------------------------------------------- PostgreSQL


@pytest.fixture
def two(pg_schema_dsn: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    a, b = PostgresStore(pg_schema_dsn), PostgresStore(pg_schema_dsn)
    yield a, b
    a.close()
    b.close()


@pytest.mark.postgres
def test_a_decision_on_one_store_wakes_a_poll_on_another(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two
    instance, reviewer = _people(a)
    request = _new(a, instance).request
    out: list[Any] = []
    thread = threading.Thread(
        target=lambda: out.append(b.poll(request.id, viewer=instance, wait=10))
    )
    thread.start()
    assert b._feed.wait_for_waiting(1, timeout=5)
    sent = time.monotonic()
    a.decide(request.id, reviewer=reviewer, status="approved")
    thread.join(5)
    assert "approved" == out[0].status
    assert time.monotonic() - sent < 1
    assert b.wait_for_change(after=0, timeout=2) >= a.seq


@pytest.mark.postgres
def test_racing_creates_and_decisions_on_two_stores(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two
    instance, reviewer = _people(a)
    results: list[Any] = []
    barrier = threading.Barrier(2)

    def create(store: PostgresStore) -> None:
        barrier.wait()
        results.append(_new(store, instance, key="race"))

    threads = [threading.Thread(target=create, args=(s,)) for s in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert 1 == len({r.request.id for r in results})
    assert [False, True] == sorted(r.created for r in results)
    request_id = results[0].request.id
    wins: list[str] = []
    barrier = threading.Barrier(2)

    def decide(store: PostgresStore, status: str) -> None:
        barrier.wait()
        try:
            store.decide(request_id, reviewer=reviewer, status=status)
            wins.append(status)
        except NotPendingError:
            pass

    threads = [
        threading.Thread(target=decide, args=(a, "approved")),
        threading.Thread(target=decide, args=(b, "denied")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert 1 == len(wins)
