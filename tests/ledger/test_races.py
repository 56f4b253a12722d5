"""Races between processes (not threads) for one request id, on the shared ledgers."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from approval_guard._ledger.protocol import FINISHED
from tests.support.ledger import guard_spec, provider_rows, tool_runs

if TYPE_CHECKING:
    from tests.support.ledger import Backend, Workers

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")

WORKERS = 20


@pytest.mark.slow
def test_twenty_processes_claiming_one_request_exactly_one_wins(
    shared_backend: Backend, workers: Workers
) -> None:
    """20 processes claim one request id at the same instant: exactly one claims it."""
    spec = {"mode": "claim", "ledger": shared_backend.spec, "request_id": "req-race"}

    answers = workers.race([spec] * WORKERS)

    winners = [answer["index"] for answer in answers if answer["claimed"]]
    assert len(winners) == 1
    row = shared_backend.ledger.get("req-race")
    assert row is not None and f"worker-{winners[0]}" == row.worker


@pytest.mark.slow
def test_twenty_processes_recovering_one_approval_run_the_tool_exactly_once(
    shared_backend: Backend, provider: Any, workers: Workers, tmp_path: Path
) -> None:
    """20 workers recover one approved request by one key at once: one runs, 19 are told no."""
    spec = guard_spec(shared_backend, provider, tmp_path, key="toolcall-race")
    # The first worker creates the request and dies waiting, as a crashed harness worker would.
    first = workers.start({**spec, "index": 99})
    request = provider.next_request(timeout=30)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    provider.approve(request.id, valid_for="5m")

    answers = workers.race([spec] * WORKERS)

    ran = [answer["index"] for answer in answers if answer["ran"]]
    assert len(ran) == 1
    assert sorted(answer["reason"] for answer in answers if not answer["ran"]) == (
        ["already_executed"] * (WORKERS - 1)
    )
    assert tool_runs(tmp_path) == [str(ran[0])]
    assert [r.id for r in provider.requests()] == [request.id]
    row = provider_rows(shared_backend.ledger, provider).get(request.id)
    assert row is not None and row.state == FINISHED


def test_records_that_are_not_shared_let_every_worker_run_the_tool(
    provider: Any, workers: Workers, tmp_path: Path
) -> None:
    """With a memory ledger per process, each recovering worker runs the tool: the race is real."""
    spec = guard_spec(None, provider, tmp_path, key="toolcall-unshared")
    first = workers.start({**spec, "index": 99})
    request = provider.next_request(timeout=30)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    provider.approve(request.id, valid_for="5m")

    answers = workers.race([spec] * 4)

    assert [answer["ran"] for answer in answers] == [True] * 4
    assert len(tool_runs(tmp_path)) == 4
