"""DBOS applications SIGKILLed mid-wait and mid-call, recovered by a new process: at most once.

Real processes (``tests/support/dbos_worker.py``), DBOS's system database and the
execution record on SQLite files or on PostgreSQL, the local provider over HTTP.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from approval_guard._ledger.protocol import FINISHED, STARTED
from tests.support.api import wait_for
from tests.support.frameworks import require_framework
from tests.support.ledger import provider_rows, tool_runs

if TYPE_CHECKING:
    from tests.dbos.conftest import Durable
    from tests.support.ledger import Workers

require_framework("dbos")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL"),
]


def _spec(durable: Durable, provider: Any, tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {
        "mode": "start",
        "index": 1,
        "system": durable.system,
        "ledger": durable.ledger.spec,
        "url": provider.url,
        "credential": provider.credential,
        "runs": str(tmp_path / "runs.txt"),
        "workflow": "refund-wf-1",
        **more,
    }


def _kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 60) -> None:
    """Until the worker writes ``path``; a worker that exits first fails the test at once."""
    wait_for(
        lambda: path.exists() or process.poll() is not None,
        timeout=timeout,
        what=f"{path.name} written",
    )
    if not path.exists():
        pytest.fail(f"worker exited {process.returncode}: {process.communicate()[1][-3000:]}")


def _recover(spec: dict[str, Any], index: int = 2) -> dict[str, Any]:
    """The spec of a new process that recovers the workflow (no marker: the tool returns)."""
    return {
        **{k: v for k, v in spec.items() if k not in ("marker", "after")},
        "mode": "recover",
        "index": index,
    }


@pytest.mark.parametrize(
    ("asynchronous", "via"),
    [(False, "durable"), (True, "durable"), (False, "guard"), (True, "guard")],
    ids=["sync", "async", "sync-DurableGuard", "async-DurableGuard"],
)
def test_killed_mid_wait_the_recovered_workflow_runs_the_approved_tool_once(
    durable: Durable,
    provider: Any,
    dbos_workers: Workers,
    tmp_path: Path,
    asynchronous: bool,
    via: str,
) -> None:
    """SIGKILL while waiting; a new process adopts the one request; approved, the tool runs once."""
    spec = _spec(durable, provider, tmp_path, asynchronous=asynchronous, via=via)
    crashed = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)

    _kill(crashed)

    recovering = dbos_workers.start(_recover(spec))
    assert provider.wait_for_polls(1, timeout=60)  # the recovered step waits on it again
    assert [r.id for r in provider.requests()] == [request.id]
    provider.approve(request.id, valid_for="5m")
    result = dbos_workers.result(recovering)
    assert (result["ran"], result["value"]) == (True, "refunded payment_123 by worker 2")
    assert tool_runs(tmp_path) == ["2"]
    assert [r.id for r in provider.requests()] == [request.id]
    row = provider_rows(durable.ledger.reopen(), provider).get(request.id)
    assert row is not None and row.state == FINISHED


def test_killed_while_the_tool_runs_the_recovered_step_is_already_executed(
    durable: Durable, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """SIGKILL after the claim: the recovered step gets ALREADY_EXECUTED; the tool ran once."""
    marker = tmp_path / "tool-started"
    spec = _spec(durable, provider, tmp_path, marker=str(marker), block=120)
    crashed = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)
    provider.approve(request.id, valid_for="5m")
    _wait_for(marker, crashed)

    _kill(crashed)

    result = dbos_workers.result(dbos_workers.start(_recover(spec)))
    assert (result["ran"], result["reason"]) == (False, "already_executed")
    assert tool_runs(tmp_path) == ["1"]
    assert [r.id for r in provider.requests()] == [request.id]
    row = provider_rows(durable.ledger.reopen(), provider).get(request.id)
    assert row is not None and row.state == STARTED


def test_recovered_after_the_deadline_is_not_obtained_with_no_new_request(
    durable: Durable, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """The deadline counts from the first attempt: recovered after it, NOT_OBTAINED, nothing run."""
    spec = _spec(durable, provider, tmp_path, timeout="2s", limit="5s")
    crashed = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)

    _kill(crashed)

    deadline = request.deadline_at.timestamp()
    while time.time() < deadline + 3.5:  # past the harness's limit too (5 s from the start)
        time.sleep(0.05)
    creates = provider.stats.creates
    result = dbos_workers.result(dbos_workers.start(_recover(spec)))
    assert (result["ran"], result["reason"]) == (False, "not_obtained")
    assert tool_runs(tmp_path) == []
    assert [r.id for r in provider.requests()] == [request.id]
    assert provider.stats.creates == creates  # the limit had passed: not even asked


def test_recovered_mid_wait_keeps_the_first_attempts_deadline(
    durable: Durable, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """Nobody decides after the recovery: NOT_OBTAINED at the first request's deadline."""
    spec = _spec(durable, provider, tmp_path, timeout="12s", limit="1m")
    crashed = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)

    _kill(crashed)

    deadline = request.deadline_at.timestamp()
    while time.time() < deadline - 6:  # recovered 6 s before it: a fresh 12 s would end later
        time.sleep(0.05)
    result = dbos_workers.result(dbos_workers.start(_recover(spec)))
    assert (result["ran"], result["reason"]) == (False, "not_obtained")
    assert result["at"] < deadline + 4  # the wait ends at the deadline plus its 1 s margin
    assert [r.id for r in provider.requests()] == [request.id]
    assert tool_runs(tmp_path) == []


def test_a_checkpointed_denial_is_not_asked_again_after_a_crash(
    durable: Durable, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """Denied, then SIGKILLed before the workflow ends: the recovery replays the denial."""
    after = tmp_path / "step-done"
    spec = _spec(durable, provider, tmp_path, after=str(after), block=120)
    crashed = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)
    provider.deny(request.id, note="not this one")
    _wait_for(after, crashed)

    _kill(crashed)

    asked = provider.stats.snapshot()
    result = dbos_workers.result(dbos_workers.start(_recover(spec)))
    assert (result["ran"], result["reason"]) == (False, "denied")
    assert tool_runs(tmp_path) == []
    assert [r.id for r in provider.requests()] == [request.id]
    assert provider.stats.snapshot() == asked  # the step's outcome came from the checkpoint


def test_cancelled_from_another_process_through_dbos_client_withdraws_the_request(
    durable: Durable, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """DBOSClient.cancel_workflow elsewhere: the waiting step withdraws its request promptly."""
    from dbos import DBOSClient

    spec = _spec(durable, provider, tmp_path)
    waiting = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)
    client = DBOSClient(system_database_url=durable.system)
    try:
        client.cancel_workflow(spec["workflow"])
    finally:
        client.destroy()
    wait_for(
        lambda: provider.get(request.id).status,
        lambda status: status == "cancelled",
        timeout=15,
        what="the request withdrawn",
    )
    assert tool_runs(tmp_path) == []
    waiting.kill()


@pytest.mark.postgres
def test_two_workers_recovering_the_same_workflow_run_the_tool_once(
    pg_dsn: str, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """Two processes recover one workflow at the same instant on PostgreSQL: one runs the tool."""
    from tests.dbos.conftest import Durable, _postgres_database
    from tests.support.ledger import postgres_backend

    for system in _postgres_database(pg_dsn):
        for ledger in postgres_backend(pg_dsn):
            durable = Durable("postgres", system, ledger)
            spec = _spec(durable, provider, tmp_path)
            crashed = dbos_workers.start(spec)
            request = provider.next_request(timeout=60)
            _kill(crashed)
            provider.approve(request.id, valid_for="5m")

            results = dbos_workers.race([_recover(spec, 2), _recover(spec, 3)], timeout=120)

            assert len(tool_runs(tmp_path)) == 1
            assert [r.id for r in provider.requests()] == [request.id]
            # DBOS lets one execution own the workflow; the other adopts its recorded result.
            first, second = (
                {k: v for k, v in r.items() if k not in ("index", "at")} for r in results
            )
            assert first == second
            assert first["ran"] or first["reason"] == "already_executed"


def test_a_recovery_that_takes_the_workflow_from_a_worker_mid_tool_records_already_executed(
    durable: Durable, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """Worker 3 takes the workflow while worker 2 runs the tool: once, ALREADY_EXECUTED recorded."""
    spec = _spec(durable, provider, tmp_path)
    crashed = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)
    _kill(crashed)
    provider.approve(request.id, valid_for="5m")
    marker = tmp_path / "tool-started"
    running = dbos_workers.start({**_recover(spec), "marker": str(marker), "block": 8})
    _wait_for(marker, running)

    taking = dbos_workers.result(dbos_workers.start(_recover(spec, 3)))
    ran = dbos_workers.result(running)

    assert tool_runs(tmp_path) == ["2"]
    # What docs/durable.md says a user sees: the owner's ALREADY_EXECUTED is the recorded
    # result, and worker 2, which ran the tool, adopts it (its value is in its own log only).
    assert (taking["ran"], taking["reason"]) == (False, "already_executed")
    assert (ran["ran"], ran["reason"]) == (False, "already_executed")


def test_a_harness_key_around_the_workflow_is_the_key_of_its_recovery(
    durable: Durable, provider: Any, dbos_workers: Workers, tmp_path: Path
) -> None:
    """harness_call(idempotency_key=...) around the workflow: the recovery adopts that request."""
    spec = _spec(durable, provider, tmp_path, harness_key="toolcall_abc")
    crashed = dbos_workers.start(spec)
    request = provider.next_request(timeout=60)

    _kill(crashed)

    recovering = dbos_workers.start(_recover(spec))
    assert provider.wait_for_polls(1, timeout=60)  # the recovered step waits on it again
    assert [r.id for r in provider.requests()] == [request.id]
    provider.approve(request.id, valid_for="5m")
    result = dbos_workers.result(recovering)
    assert (result["ran"], result["value"]) == (True, "refunded payment_123 by worker 2")
    assert tool_runs(tmp_path) == ["2"]
    assert [r.id for r in provider.requests()] == [request.id]
