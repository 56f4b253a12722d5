"""``describe=``: asked before each request for the sentence it sends (checked in ``spec.py``).

A tool's ``describe`` is given the call's arguments as the reviewer sees them
(JSON values, a redacted value as its marker, read-only), so its sentence can
never reveal what ``redact=`` hides; what it returns is sent as the request's
API 1.3 ``context``. It is the tool's own words, not a permission: nothing is
decided from it. Fail closed: a describe that raises or returns anything but a
sentence sends nothing, and the tool does not run.
"""

from __future__ import annotations

import copy
import inspect
import logging
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from approval_guard._call.ops import CallPlan
from approval_guard._call.outcome import NotRun
from approval_guard._call.plan import refused, with_context
from approval_guard._options.spec import context_problem

if TYPE_CHECKING:
    from approval_guard._options.spec import ToolSpec

log = logging.getLogger("approval_guard")


def described(spec: ToolSpec, plan: CallPlan | NotRun) -> CallPlan | NotRun:
    """``plan`` with ``describe``'s sentence as its context, or why nothing is sent.

    Unchanged when there is nothing to describe: no plan, no ``describe``, or a
    harness's own reason already (it takes the place of the tool's sentence).
    """
    describe = spec.describe
    if describe is None or isinstance(plan, NotRun) or plan.context is not None:
        return plan
    try:
        sentence = describe(MappingProxyType(copy.deepcopy(plan.arguments)))
    except Exception as exc:
        return _raised(spec, plan, exc)
    return _sentence(spec, plan, sentence)


async def described_async(spec: ToolSpec, plan: CallPlan | NotRun) -> CallPlan | NotRun:
    """:func:`described` for an async tool: ``describe`` may be async (or return an awaitable)."""
    describe = spec.describe
    if describe is None or isinstance(plan, NotRun) or plan.context is not None:
        return plan
    try:
        sentence = describe(MappingProxyType(copy.deepcopy(plan.arguments)))
        if inspect.isawaitable(sentence):
            sentence = await sentence
    except Exception as exc:
        return _raised(spec, plan, exc)
    return _sentence(spec, plan, sentence)


def _raised(spec: ToolSpec, plan: CallPlan, exc: Exception) -> NotRun:
    # Its message is not quoted: it may hold an argument's value.
    log.warning(
        "describe= of %s raised %s; nothing sent", spec.name, type(exc).__name__, exc_info=True
    )
    return refused(
        spec,
        plan.arguments,
        f"The tool's describe function raised {type(exc).__name__}, so nothing was sent "
        f"for approval and {spec.name} did not run.",
    )


def _sentence(spec: ToolSpec, plan: CallPlan, sentence: Any) -> CallPlan | NotRun:
    problem = context_problem(sentence)
    if problem is None:
        return with_context(plan, str.__str__(sentence))  # a str subclass as plain text
    if inspect.iscoroutine(sentence):
        sentence.close()  # never awaited: closed, so it warns nobody
    log.warning("describe= of %s returned %s; nothing sent", spec.name, problem)
    return refused(
        spec,
        plan.arguments,
        f"The tool's describe function returned {problem} instead of a sentence, so "
        f"nothing was sent for approval and {spec.name} did not run.",
    )
