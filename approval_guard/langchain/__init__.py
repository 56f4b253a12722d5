"""LangChain agents (``langchain`` >= 1) with approval_guard as their approval backend.

:class:`ApprovalMiddleware` takes ``HumanInTheLoopMiddleware``'s
``interrupt_on={tool: ...}``, and its decisions come from the approval
provider instead of a LangGraph interrupt: approve, edit and reject are the
provider's approval, approval with edited arguments, and denial. Install with
``pip install 'approval-guard[langchain]'``.
"""

from approval_guard.langchain._middleware import EDIT_NOTICE, ApprovalMiddleware
from approval_guard.langchain._review import Review

__all__ = ["EDIT_NOTICE", "ApprovalMiddleware", "Review"]
