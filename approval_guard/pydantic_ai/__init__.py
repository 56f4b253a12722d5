"""Pydantic AI (``pydantic-ai-slim``) with approval_guard as its approval backend.

- :func:`guarded`: a toolset whose listed tools wait for a person's approval,
  each call by the core's rules (synchronous mode).
- :func:`resolve_deferred`: Pydantic AI's own deferred approvals
  (``requires_approval=True``, ``DeferredToolRequests``) answered from the
  provider, as ``ToolApproved`` / ``ToolDenied``.
- :func:`as_model_retry`: an ``on_not_run`` that tells the model through ``ModelRetry``.

A function tool (``@agent.tool`` / ``@agent.tool_plain``) takes
``@guard.requires_approval(on_not_run=str)`` under Pydantic AI's decorator; its
``RunContext`` parameter is recognised and never sent. Install with
``pip install 'approval-guard[pydantic-ai]'``.
"""

try:
    from approval_guard.pydantic_ai._deferred import resolve_deferred
    from approval_guard.pydantic_ai._retry import as_model_retry
    from approval_guard.pydantic_ai._toolset import GuardedToolset, guarded
except ModuleNotFoundError as exc:  # pragma: no cover - depends on what is installed
    if exc.name is None or exc.name.split(".")[0] not in (
        "pydantic_ai",
        "pydantic",
        "pydantic_core",
    ):
        raise
    raise ModuleNotFoundError(
        f"approval_guard.pydantic_ai needs Pydantic AI ({exc.name} is missing): "
        "pip install 'approval-guard[pydantic-ai]'",
        name=exc.name,
    ) from exc

__all__ = ["GuardedToolset", "as_model_retry", "guarded", "resolve_deferred"]
