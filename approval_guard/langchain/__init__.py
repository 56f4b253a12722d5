"""LangChain agents (``langchain`` >= 1) with approval_guard as their approval backend.

:class:`ApprovalMiddleware` takes ``HumanInTheLoopMiddleware``'s
``interrupt_on={tool: ...}``, and its decisions come from the approval
provider instead of a LangGraph interrupt: approve, edit and reject are the
provider's approval, approval with edited arguments, and denial. Install with
``pip install 'approval-guard[langchain]'``.
"""

try:
    from approval_guard.langchain._middleware import EDIT_NOTICE, ApprovalMiddleware
    from approval_guard.langchain._review import Review
except ModuleNotFoundError as exc:  # pragma: no cover - depends on what is installed
    if exc.name is None or exc.name.split(".")[0] not in (
        "langchain",
        "langchain_core",
        "langgraph",
    ):
        raise
    raise ModuleNotFoundError(
        f"approval_guard.langchain needs LangChain ({exc.name} is missing): "
        "pip install 'approval-guard[langchain]'",
        name=exc.name,
    ) from exc

__all__ = ["EDIT_NOTICE", "ApprovalMiddleware", "Review"]
