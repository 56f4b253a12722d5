"""A poll's request settled on another instance is read ahead by the listener, for that poll.

The listening thread, already awake when it hears another instance's change,
reads the requests that polls here wait on and hands each poll its settled
state with the wake-up; a poll given nothing reads for itself, so a lost
notification (a reconnect) still wakes every poll to re-read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from approval_guard.provider import PostgresStore
from approval_guard.provider.store.feed import ChangeFeed
from approval_guard.provider.store.pg_listen import settled_states
from tests.support.api import wait_for

REFUND = {"payment_id": "p_1", "amount": 4900, "currency": "GBP"}


def _row(status: str, owner: str) -> dict[str, Any]:
    return {"status": status, "owner_id": owner}


def test_only_settled_requests_the_viewer_may_see_are_read_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pending rows, missing rows and another owner's rows are left for the poll to read."""
    import approval_guard.provider.store.pg_listen as pg_listen

    monkeypatch.setattr(pg_listen, "request_from_row", lambda row: ("state", row["status"]))
    rows = {
        "done": _row("approved", "agent"),
        "open": _row("pending", "agent"),
        "theirs": _row("denied", "other"),
    }
    reads: list[str] = []

    def select(request_id: str) -> Any:
        reads.append(request_id)
        return rows.get(request_id)

    expected = [
        ("done", "agent"),
        ("done", None),
        ("open", "agent"),
        ("theirs", "agent"),
        ("gone", "agent"),
    ]
    out = settled_states(select, expected)
    assert {
        ("done", "agent"): ("state", "approved"),
        ("done", None): ("state", "approved"),
    } == out
    assert ["done", "open", "theirs", "gone"] == reads  # each row read once


def test_a_settled_state_is_kept_only_for_a_poll_expecting_it() -> None:
    """The feed keeps a state for a waiting poll until taken, and nothing for anyone else."""
    feed = ChangeFeed(reads_ahead=True)
    with feed.expecting("r1", "agent") as take:
        assert [("r1", "agent")] == feed.expected(("r1", "r2"))
        feed.changed(1, ("r1", "r2"), {("r1", "agent"): "approved", ("r2", "agent"): "denied"})
        assert "approved" == take()
        assert take() is None  # taken once
        feed.changed(2, ("r1",), {("r1", "agent"): "cancelled"})
    assert [] == feed.expected(("r1",))
    assert {} == feed._settled  # nobody expects it any more: nothing kept


def test_a_feed_without_a_listener_keeps_nothing() -> None:
    """SQLite's feed (no listener reads ahead) registers no poll and hands none a state."""
    feed = ChangeFeed()
    with feed.expecting("r1", "agent") as take:
        assert [] == feed.expected(("r1",))
        feed.changed(1, ("r1",), {("r1", "agent"): "approved"})
        assert take() is None
    assert {} == feed._settled


@pytest.fixture
def two(pg_schema_dsn: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    a, b = PostgresStore(pg_schema_dsn), PostgresStore(pg_schema_dsn)
    yield a, b
    a.close()
    b.close()


def _people(store: PostgresStore) -> tuple[Any, Any]:
    instance = store.authenticate(store.create_credential("instance", "agent"))
    reviewer = store.authenticate(store.create_credential("reviewer", "alice"))
    assert instance is not None and reviewer is not None
    return instance, reviewer


def _until(check: Callable[[], Any], seconds: float = 10) -> Any:
    try:
        return wait_for(check, timeout=seconds)
    except AssertionError:
        return None


@pytest.mark.postgres
def test_a_decision_on_another_instance_reaches_the_poll_read_ahead(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    """B's listener reads the request A decided and hands it to the poll expecting it on B."""
    a, b = two
    instance, reviewer = _people(a)
    request = a.create_request(
        owner=instance, idempotency_key="k", tool="issue_refund", arguments=REFUND,
        timeout_seconds=1800,
    )  # fmt: skip
    with b.expecting(request.request.id, owner_id=instance.id) as settled:
        a.decide(request.request.id, reviewer=reviewer, status="approved")
        state = _until(settled)
    assert state is not None and "approved" == state.status
    assert request.request.id == state.id


@pytest.mark.postgres
def test_another_owners_poll_is_given_nothing_read_ahead(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    """A poll by a credential that does not own the request gets no state from the listener."""
    a, b = two
    instance, reviewer = _people(a)
    made = a.create_request(
        owner=instance, idempotency_key="k", tool="issue_refund", arguments=REFUND,
        timeout_seconds=1800,
    )  # fmt: skip
    with b.expecting(made.request.id, owner_id="someone-else") as settled:
        a.decide(made.request.id, reviewer=reviewer, status="denied")
        assert _until(lambda: b.seq >= a.seq, 5)  # B has heard of the decision
        assert settled() is None


@pytest.mark.postgres
def test_a_notification_lost_while_reconnecting_still_wakes_the_poll(
    two: tuple[PostgresStore, PostgresStore], pg_schema_dsn: str
) -> None:
    """B's listening connection is killed; A's decision meanwhile still ends B's poll."""
    import psycopg

    a, b = two
    instance, reviewer = _people(a)
    made = a.create_request(
        owner=instance, idempotency_key="k", tool="issue_refund", arguments=REFUND,
        timeout_seconds=1800,
    )  # fmt: skip
    out: list[Any] = []
    thread = threading.Thread(
        target=lambda: out.append(b.poll(made.request.id, viewer=instance, wait=20))
    )
    thread.start()
    assert b.wait_for_waiting_polls(1, 5)
    listening = b._listener._conn.info.backend_pid
    with psycopg.connect(pg_schema_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (listening,))
    a.decide(made.request.id, reviewer=reviewer, status="approved")
    thread.join(15)
    assert not thread.is_alive()
    assert "approved" == out[0].status
