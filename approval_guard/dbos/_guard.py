"""``DurableGuard``: a Guard whose every guarded call, inside a DBOS workflow, is a durable step.

The same step as :func:`~approval_guard.dbos.durable` (``_step.py``), for every
tool of the Guard and every framework integration that calls through it (a
``approval_guard.pydantic_ai.guarded(...)`` toolset, say), with no decorator per tool.
"""

from __future__ import annotations

from typing import Any

from approval_guard._guard import Guard
from approval_guard._options.spec import ToolSpec
from approval_guard.dbos._step import as_step, as_step_async, check_record


class DurableGuard(Guard):
    """A :class:`~approval_guard.Guard` whose guarded calls are durable DBOS steps in a workflow.

    ::

        guard = DurableGuard(base_url="https://approvals.example.com", credential=...,
                             ledger=ag.PostgresLedger(dsn))

        @guard.requires_approval(timeout="30m")
        def issue_refund(payment_id: str, amount: int) -> str: ...

        @DBOS.workflow()
        def refund_flow(payment_id: str) -> object:
            return issue_refund(payment_id, 4900)  # a durable step, keyed by the workflow

    Takes exactly :class:`~approval_guard.Guard`'s options, and ``ledger`` must be
    an execution record every process that may recover the workflow shares
    (``SQLiteLedger`` or ``PostgresLedger``): without one, a crash between the claim
    and the tool's end could run the tool twice, so it raises
    :class:`~approval_guard.exceptions.ConfigurationError`. Inside DBOS workflow code
    each guarded call runs as :func:`~approval_guard.dbos.durable` runs it (the
    step ``approval_guard:<tool name>``); outside a workflow, or inside another
    step, it is a Guard's call, unchanged.
    """

    def _check(self) -> None:
        check_record(self)

    def _call_sync(self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        plain = super()._call_sync
        return as_step(f"approval_guard:{spec.name}", plain, (spec, args, kwargs), {})

    async def _call_async(
        self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        plain = super()._call_async
        return await as_step_async(f"approval_guard:{spec.name}", plain, (spec, args, kwargs), {})
