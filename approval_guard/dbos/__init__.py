"""Durable waits on DBOS: a guarded tool as a workflow step that survives its process.

``pip install 'approval-guard[dbos]'``. Inside a ``@DBOS.workflow()``, a guarded
call made through a :class:`DurableGuard`, or a guarded tool wrapped in
:func:`durable`, runs as a DBOS step whose idempotency key is the workflow's id
and the step's position (:func:`step_key`), so a workflow recovered after a crash
adopts the same approval request, keeps its deadline, and runs the tool at most
once (the execution record decides). See docs/durable.md.
"""

from approval_guard.dbos._guard import DurableGuard
from approval_guard.dbos._step import durable, step_key

__all__ = ["DurableGuard", "durable", "step_key"]
