"""The execution record's contract, with the same assertions for every backend.

Each test runs against the memory, SQLite and PostgreSQL ledgers (the
``backend``/``ledger`` fixtures in conftest.py).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import attrs
import pytest

import approval_guard as ag
from approval_guard._ledger.protocol import FAILED, FINISHED, STARTED, Execution, Ledger
from approval_guard.exceptions import LedgerError

if TYPE_CHECKING:
    from tests.support.ledger import Backend


def test_ledger_keeps_the_protocol(ledger: Ledger) -> None:
    """Every backend is a Ledger."""
    assert isinstance(ledger, Ledger)


def test_first_claim_wins_and_second_loses(ledger: Ledger) -> None:
    """Of two claims on one request id, only the first wins."""
    assert [
        ledger.claim("req-1", tool="refund", worker="w1"),
        ledger.claim("req-1", tool="refund", worker="w2"),
    ] == [True, False]


def test_claim_records_started_with_tool_worker_and_time(ledger: Ledger) -> None:
    """A won claim is a 'started' row naming the tool and the winning worker."""
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    ledger.claim("req-1", tool="refund", worker="host-a:1")
    ledger.claim("req-1", tool="refund", worker="host-b:2")

    row = ledger.get("req-1")

    assert row is not None
    assert (
        row.request_id,
        row.tool,
        row.state,
        row.worker,
        row.ended_at,
        row.error,
    ) == ("req-1", "refund", STARTED, "host-a:1", None, None)
    assert before <= row.started_at <= datetime.now(timezone.utc) + timedelta(seconds=5)


def test_claims_on_different_request_ids_are_independent(ledger: Ledger) -> None:
    """Claiming one request id does not block another."""
    assert [
        ledger.claim("req-1", tool="t", worker="w"),
        ledger.claim("req-2", tool="t", worker="w"),
    ] == [True, True]


def test_finish_marks_the_claim_finished_with_an_end_time(ledger: Ledger) -> None:
    """finish() turns 'started' into 'finished' and stamps ended_at."""
    ledger.claim("req-1", tool="t", worker="w")
    ledger.finish("req-1")

    row = ledger.get("req-1")

    assert row is not None
    assert (row.state, row.error) == (FINISHED, None)
    assert row.ended_at is not None and row.ended_at >= row.started_at


def test_fail_marks_the_claim_failed_with_the_error(ledger: Ledger) -> None:
    """fail() turns 'started' into 'failed' and keeps the error text."""
    ledger.claim("req-1", tool="t", worker="w")
    ledger.fail("req-1", "ValueError: no such payment")

    row = ledger.get("req-1")

    assert row is not None
    assert (row.state, row.error) == (FAILED, "ValueError: no such payment")
    assert row.ended_at is not None


@pytest.mark.parametrize("end", ["finish", "fail"])
def test_an_ended_call_still_counts_as_run(ledger: Ledger, end: str) -> None:
    """After finish or fail, the request id can never be claimed again."""
    ledger.claim("req-1", tool="t", worker="w")
    ledger.finish("req-1") if end == "finish" else ledger.fail("req-1", "boom")

    assert False is ledger.claim("req-1", tool="t", worker="w2")


def test_ending_applies_only_to_a_started_row(ledger: Ledger) -> None:
    """A second finish/fail does not rewrite a row that already ended."""
    ledger.claim("req-1", tool="t", worker="w")
    ledger.fail("req-1", "first")
    first = ledger.get("req-1")

    ledger.finish("req-1")
    ledger.fail("req-1", "second")

    assert first == ledger.get("req-1")


def test_release_gives_back_a_started_claim(ledger: Ledger) -> None:
    """After release, the row is gone and the next claim wins."""
    ledger.claim("req-1", tool="t", worker="w")
    ledger.release("req-1")

    assert None is ledger.get("req-1")
    assert True is ledger.claim("req-1", tool="t", worker="w2")


@pytest.mark.parametrize("end", ["finish", "fail"])
def test_release_never_undoes_an_ended_call(ledger: Ledger, end: str) -> None:
    """release() leaves a finished or failed row alone, so the call stays 'run'."""
    ledger.claim("req-1", tool="t", worker="w")
    ledger.finish("req-1") if end == "finish" else ledger.fail("req-1", "boom")

    ledger.release("req-1")

    row = ledger.get("req-1")
    assert row is not None and row.state in (FINISHED, FAILED)
    assert False is ledger.claim("req-1", tool="t", worker="w2")


def test_operations_on_an_unknown_request_do_nothing(ledger: Ledger) -> None:
    """finish, fail and release of a request nobody claimed create no row."""
    ledger.finish("nope")
    ledger.fail("nope", "x")
    ledger.release("nope")

    assert (ledger.get("nope"), ledger.recent()) == (None, [])


def test_recent_lists_newest_first_up_to_the_limit(ledger: Ledger) -> None:
    """recent() returns the newest rows first and at most `limit` of them."""
    for n in range(5):
        ledger.claim(f"req-{n}", tool="t", worker="w")

    assert [row.request_id for row in ledger.recent()] == [
        "req-4",
        "req-3",
        "req-2",
        "req-1",
        "req-0",
    ]
    assert [row.request_id for row in ledger.recent(limit=2)] == ["req-4", "req-3"]


def test_prune_deletes_rows_older_than_the_age_and_counts_them(ledger: Ledger) -> None:
    """prune() keeps rows younger than the age and deletes (and counts) the older ones."""
    ledger.claim("req-1", tool="t", worker="w")
    ledger.finish("req-1")
    ledger.claim("req-2", tool="t", worker="w")  # still started: aged by its start

    assert ledger.prune(timedelta(days=1)) == 0
    assert len(ledger.recent()) == 2

    assert ledger.prune(timedelta(0)) == 2
    assert ledger.recent() == []


def test_another_handle_on_the_same_record_sees_the_claim(backend: Backend) -> None:
    """A claim made through one handle makes every other handle on the record lose."""
    backend.ledger.claim("req-1", tool="t", worker="w1")
    other = backend.reopen()

    assert False is other.claim("req-1", tool="t", worker="w2")
    row = other.get("req-1")
    assert row is not None and row.worker == "w1"


def test_concurrent_claims_from_32_threads_exactly_one_wins(backend: Backend) -> None:
    """32 threads claiming one request id at the same instant: exactly one wins."""
    barrier = threading.Barrier(32)
    results: list[bool] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    # Half the threads share the fixture's handle, half open their own, so both the
    # in-process lock and the record's own atomicity are exercised.
    handles = [backend.ledger if n % 2 else backend.reopen() for n in range(32)]

    def claim(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            won = handles[n].claim("req-race", tool="t", worker=f"thread-{n}")
        except BaseException as exc:
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(won)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert (errors, results.count(True), len(results)) == ([], 1, 32)


def test_a_broken_record_raises_ledger_error(backend: Backend) -> None:
    """When the record cannot be read or written, every operation raises LedgerError."""
    if backend.sabotage is None:
        pytest.skip(f"the {backend.name} ledger has nothing that can break")
    backend.ledger.claim("req-0", tool="t", worker="w")
    backend.sabotage()

    with pytest.raises(LedgerError):
        backend.ledger.claim("req-1", tool="t", worker="w")
    with pytest.raises(LedgerError):
        backend.ledger.get("req-0")
    with pytest.raises(LedgerError):
        backend.ledger.finish("req-0")
    with pytest.raises(LedgerError):
        backend.ledger.recent()


def test_repr_names_the_backend_and_hides_secrets(backend: Backend) -> None:
    """repr() says which ledger it is and never shows a secret from its configuration."""
    text = repr(backend.ledger)

    assert type(backend.ledger).__name__ in text
    if backend.secret:
        assert backend.secret not in text


def test_a_memory_ledger_row_keeps_every_field_through_finish_and_fail() -> None:
    """The memory ledger's rows read back as the Execution they were written as."""
    assert [
        "request_id",
        "tool",
        "state",
        "worker",
        "started_at",
        "ended_at",
        "error",
        "arguments_digest",
    ] == [field.name for field in attrs.fields(Execution)]
    ledger = ag.MemoryLedger()
    digest = "a" * 64
    for request_id, end in (("r1", "finish"), ("r2", "fail")):
        assert ledger.claim(request_id, tool="t", worker="w", arguments_digest=digest)
        claimed = ledger.get(request_id)
        assert claimed is not None and (claimed.state, claimed.ended_at) == ("started", None)
        if end == "finish":
            ledger.finish(request_id)
        else:
            ledger.fail(request_id, "boom")
        row = ledger.get(request_id)
        assert row is not None and row.ended_at is not None
        assert (request_id, "t", "w", claimed.started_at, digest) == (
            row.request_id,
            row.tool,
            row.worker,
            row.started_at,
            row.arguments_digest,
        )
        assert (("finished", None) if end == "finish" else ("failed", "boom")) == (
            row.state,
            row.error,
        )
