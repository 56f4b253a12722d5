"""Durable waits on DBOS: a guarded tool as a workflow step that survives its process.

``pip install 'approval-guard[dbos]'``. Wrap a guarded tool with :func:`durable`;
called inside a ``@DBOS.workflow()``, it runs as a DBOS step whose idempotency key
is the workflow's id and the step's position (:func:`step_key`), so a workflow
recovered after a crash adopts the same approval request, keeps its deadline, and
runs the tool at most once (the execution record decides). For Pydantic AI's DBOS
agent, :func:`durable_toolset` makes a toolset's calls such steps (it needs
``pydantic-ai-slim``, imported only when it is used). See docs/durable.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from approval_guard.dbos._step import durable, step_key

if TYPE_CHECKING:
    from approval_guard.dbos._toolset import DurableToolset, durable_toolset

__all__ = ["DurableToolset", "durable", "durable_toolset", "step_key"]


def __getattr__(name: str) -> Any:
    # Pydantic AI only for those who use it: DBOS alone is the extra's requirement.
    if name in ("DurableToolset", "durable_toolset"):
        from approval_guard.dbos import _toolset

        return getattr(_toolset, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
