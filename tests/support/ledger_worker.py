"""One worker process for the race and crash tests: a script, not a test module.

    AG_WORKER='{"mode": "claim", ...}' python tests/support/ledger_worker.py

The spec travels in the environment, not argv, so a DSN's password stays out of
``ps``. Keys:

``mode``
    ``"claim"``: claim ``request_id`` in the ledger. ``"open"``: like ``"claim"``,
    but open the ledger only after the barrier (so the race is the open, which
    may upgrade an old table) and claim with ``digest``. ``"guard"``: call a guarded
    tool through ``approval_guard.Guard`` and ``harness_call(idempotency_key=key)``.
``ledger``
    ``{"kind": "sqlite", "path": ...}``, ``{"kind": "postgres", "dsn": ..., "table": ...}``,
    or ``{"kind": "memory"}`` (a record of this process only).
``index``
    This worker's number, echoed in its output and written to ``runs``.
``barrier`` (optional)
    A directory: the worker writes ``ready-<index>`` when it is set up, waits for
    ``go`` to appear, then spins until the wall-clock instant written in it, so
    that every worker acts within a fraction of a millisecond of the others.
``url``, ``credential``, ``key``, ``runs``, ``marker``, ``block`` (guard mode)
    The provider, the idempotency key, a file the tool appends a line to each
    time it runs, and optionally a file the tool writes once it has started,
    after which it sleeps ``block`` seconds (so the test can kill it mid-call).

Prints one JSON object on stdout: ``{"index": n, "claimed": bool}`` or
``{"index": n, "ran": bool, "reason": str | null, "value": str | null}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def make_ledger(spec: dict[str, Any]) -> Any:
    """The ledger a spec describes (the same function lives in conftest.py)."""
    from approval_guard._ledger.memory import MemoryLedger
    from approval_guard._ledger.sqlite import SQLiteLedger

    if spec["kind"] == "memory":
        return MemoryLedger()  # this process's own record: shared with nobody
    if spec["kind"] == "sqlite":
        return SQLiteLedger(spec["path"])
    from approval_guard._ledger.postgres import PostgresLedger

    return PostgresLedger(spec["dsn"], table=spec["table"])


def wait_at_barrier(directory: str | None, index: int) -> None:
    """Report ready, then wait for the common start instant."""
    if directory is None:
        return
    barrier = Path(directory)
    (barrier / f"ready-{index}").touch()
    go = barrier / "go"
    deadline = time.monotonic() + 120
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("barrier: no go signal within 120 s")
        time.sleep(0.001)
    start_at = float(go.read_text())
    # Spin, not sleep: sleep's wake-up jitter is larger than the window we want.
    while time.time() < start_at:
        pass


def run_claim(spec: dict[str, Any]) -> dict[str, Any]:
    ledger = make_ledger(spec["ledger"])
    ledger.get("warm-up")  # connect now, so that the race is the claim and not the connect
    wait_at_barrier(spec.get("barrier"), spec["index"])
    claimed = ledger.claim(spec["request_id"], tool="race", worker=f"worker-{spec['index']}")
    return {"index": spec["index"], "claimed": claimed}


def run_open(spec: dict[str, Any]) -> dict[str, Any]:
    wait_at_barrier(spec.get("barrier"), spec["index"])
    ledger = make_ledger(spec["ledger"])
    claimed = ledger.claim(
        spec["request_id"],
        tool="race",
        worker=f"worker-{spec['index']}",
        arguments_digest=spec.get("digest"),
    )
    return {"index": spec["index"], "claimed": claimed}


def run_guard(spec: dict[str, Any]) -> dict[str, Any]:
    import approval_guard as ag

    index = spec["index"]
    guard = ag.Guard(
        base_url=spec["url"],
        credential=spec["credential"],
        harness_limit="2m",
        poll_wait="5s",
        return_margin="1s",
        deadline_margin="1s",
        ledger=make_ledger(spec["ledger"]),
    )

    # The same tool, arguments and configuration in every worker, so that each
    # worker's create is a byte-identical replay of the same keyed request.
    @guard.requires_approval(timeout="1m")
    def issue_refund(payment_id: str, amount: int) -> str:
        with open(spec["runs"], "a") as runs:
            runs.write(f"{index}\n")
            runs.flush()
            os.fsync(runs.fileno())
        if spec.get("marker"):
            Path(spec["marker"]).write_text(str(index))
            time.sleep(float(spec.get("block", 60)))
        return f"refunded by worker {index}"

    wait_at_barrier(spec.get("barrier"), index)
    with ag.harness_call(idempotency_key=spec["key"], limit="2m"):
        out = issue_refund("payment_123", 4900)
    if isinstance(out, ag.NotRun):
        return {"index": index, "ran": False, "reason": out.reason.value, "value": str(out)}
    return {"index": index, "ran": True, "reason": None, "value": out}


def main() -> None:
    spec = json.loads(os.environ["AG_WORKER"])
    run = {"claim": run_claim, "open": run_open}.get(spec["mode"], run_guard)
    result = run(spec)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
