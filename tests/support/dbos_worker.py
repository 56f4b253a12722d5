"""One DBOS application process for the durable-wait tests: a script, not a test module.

    AG_WORKER='{"mode": "start", ...}' python tests/support/dbos_worker.py

Keys of the spec (JSON in the environment, so a DSN's password stays out of ``ps``):

``mode``
    ``"start"``: launch DBOS and start workflow ``workflow`` (id), which calls the
    guarded tool, and wait for its result. ``"recover"``: launch DBOS (which
    recovers this executor's pending workflows) and wait for workflow ``workflow``.
``system``
    DBOS's system database URL (``sqlite:///...`` or ``postgresql://...``).
``ledger``
    The execution record, as in ``ledger_worker.py``.
``url``, ``credential``, ``runs``, ``marker``, ``block``, ``index``
    The provider; a file the tool appends this worker's index to each time it
    runs; optionally a file the tool writes once started, after which it sleeps
    ``block`` seconds (so the test can kill it mid-call).
``asynchronous``
    True: an async workflow and an async guarded tool.
``via``
    ``"durable"`` (default): the tools are wrapped in ``durable``; ``"guard"``: they
    are plain tools of a ``DurableGuard``.
``timeout``, ``limit``
    The tool's approval timeout and the harness limit (defaults ``1m``, ``2m``).
``after`` (optional)
    A file the workflow writes once the guarded step has returned, after which it
    sleeps ``block`` seconds (so the test can kill it with the step checkpointed).
``harness_key`` (optional, mode ``"start"``, sync)
    The workflow is called directly inside ``harness_call(idempotency_key=...)``
    (a harness that names the key around the workflow, not inside it).
``barrier`` (optional)
    As in ``ledger_worker.py``: every worker launches DBOS at one instant.

Prints one JSON object: the workflow's result, ``{"index": n, "ran": bool,
"reason": str | null, "value": str, "at": <time.time() when it came>}``, where ``index``
is the worker that printed it,
or ``{"index": n, "error": "<exception type>"}`` when waiting for it raised.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.ledger_worker import make_ledger, wait_at_barrier


def main() -> None:
    spec: dict[str, Any] = json.loads(os.environ["AG_WORKER"])
    from dbos import DBOS, SetWorkflowID

    import approval_guard as ag
    from approval_guard.dbos import DurableGuard, durable

    index = spec["index"]
    by_guard = spec.get("via") == "guard"
    guard = (DurableGuard if by_guard else ag.Guard)(
        base_url=spec["url"],
        credential=spec["credential"],
        harness_limit=spec.get("limit", "2m"),
        poll_wait="5s",
        return_margin="1s",
        deadline_margin="1s",
        ledger=make_ledger(spec["ledger"]),
    )

    def record_run() -> None:
        with open(spec["runs"], "a") as runs:
            runs.write(f"{index}\n")
            runs.flush()
            os.fsync(runs.fileno())

    def answer(out: Any) -> dict[str, Any]:
        if isinstance(out, ag.NotRun):
            return {"ran": False, "reason": out.reason.value, "value": out.message}
        return {"ran": True, "reason": None, "value": out}

    timeout = spec.get("timeout", "1m")
    wrap: Any = (lambda fn: fn) if by_guard else durable

    @wrap
    @guard.requires_approval(timeout=timeout)
    def issue_refund(payment_id: str, amount: int) -> str:
        record_run()
        if spec.get("marker"):
            Path(spec["marker"]).write_text(str(index))
            time.sleep(float(spec.get("block", 60)))
        return f"refunded {payment_id} by worker {index}"

    @wrap
    @guard.requires_approval(timeout=timeout)
    async def issue_refund_async(payment_id: str, amount: int) -> str:
        record_run()
        if spec.get("marker"):
            Path(spec["marker"]).write_text(str(index))
            time.sleep(float(spec.get("block", 60)))
        return f"refunded {payment_id} by worker {index}"

    def then(out: Any) -> dict[str, Any]:
        if spec.get("after"):
            Path(spec["after"]).write_text(str(index))
            time.sleep(float(spec.get("block", 60)))
        return answer(out)

    @DBOS.workflow(name="refund_flow")
    def refund_flow(payment_id: str) -> dict[str, Any]:
        return then(issue_refund(payment_id, 4900))

    @DBOS.workflow(name="refund_flow_async")
    async def refund_flow_async(payment_id: str) -> dict[str, Any]:
        return then(await issue_refund_async(payment_id, 4900))

    DBOS(config={"name": "approval-guard-test", "system_database_url": spec["system"]})
    wait_at_barrier(spec.get("barrier"), index)
    DBOS.launch()
    try:
        if spec["mode"] == "start":
            flow: Any = refund_flow_async if spec.get("asynchronous") else refund_flow
            if spec.get("harness_key"):
                with (
                    SetWorkflowID(spec["workflow"]),
                    ag.harness_call(idempotency_key=spec["harness_key"]),
                ):
                    flow("payment_123")
            with SetWorkflowID(spec["workflow"]):
                handle = DBOS.start_workflow(flow, "payment_123")
        else:
            handle = DBOS.retrieve_workflow(spec["workflow"])
        try:
            result = {**handle.get_result(), "at": time.time()}
        except Exception as exc:
            result = {"error": type(exc).__name__}
    finally:
        guard.close()
    sys.stdout.write(json.dumps({"index": index, **result}) + "\n")
    sys.stdout.flush()
    DBOS.destroy()


if __name__ == "__main__":
    main()
