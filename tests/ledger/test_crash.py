"""Workers killed with SIGKILL, before and after the claim, on the shared ledgers."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from approval_guard._ledger.protocol import FINISHED, STARTED
from tests.support.api import wait_for
from tests.support.ledger import guard_spec, provider_rows, tool_runs

if TYPE_CHECKING:
    from tests.support.ledger import Backend, Workers

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")


def _kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 30) -> None:
    def appeared() -> bool:
        if process.poll() is not None:
            pytest.fail(f"worker exited {process.returncode}: {process.communicate()[1][-3000:]}")
        return path.exists()

    wait_for(appeared, timeout=timeout, what=f"{path.name} did not appear within {timeout} s")


def test_worker_killed_during_the_call_counts_as_run_and_a_restart_is_refused(
    shared_backend: Backend, provider: Any, workers: Workers, tmp_path: Path
) -> None:
    """Killed mid-call, after the claim: the row stays started; a restart gets ALREADY_EXECUTED."""
    spec = guard_spec(shared_backend, provider, tmp_path, key="toolcall-crash-after")
    marker = tmp_path / "tool-started"
    crashed = workers.start({**spec, "index": 1, "marker": str(marker), "block": 120})
    request = provider.next_request(timeout=30)
    provider.approve(request.id, valid_for="5m")
    _wait_for(marker, crashed)

    _kill(crashed)

    row = provider_rows(shared_backend.reopen(), provider).get(request.id)
    assert row is not None and row.state == STARTED
    restarted = workers.result(workers.start({**spec, "index": 2}))
    assert (restarted["ran"], restarted["reason"]) == (False, "already_executed")
    assert tool_runs(tmp_path) == ["1"]
    assert [r.id for r in provider.requests()] == [request.id]


def test_worker_killed_while_waiting_for_approval_leaves_the_approval_usable(
    shared_backend: Backend, provider: Any, workers: Workers, tmp_path: Path
) -> None:
    """Killed before the claim: the next worker with the same key recovers it and runs the tool."""
    spec = guard_spec(shared_backend, provider, tmp_path, key="toolcall-crash-before")
    crashed = workers.start({**spec, "index": 1})
    request = provider.next_request(timeout=30)

    _kill(crashed)

    assert provider_rows(shared_backend.ledger, provider).get(request.id) is None
    provider.approve(request.id, valid_for="5m")
    restarted = workers.result(workers.start({**spec, "index": 2}))
    assert (restarted["ran"], restarted["value"]) == (True, "refunded by worker 2")
    assert tool_runs(tmp_path) == ["2"]
    assert [r.id for r in provider.requests()] == [request.id]
    row = provider_rows(shared_backend.ledger, provider).get(request.id)
    assert row is not None and row.state == FINISHED
