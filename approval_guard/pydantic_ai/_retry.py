"""``as_model_retry``: a call that did not run, told to the model as a ``ModelRetry``."""

from __future__ import annotations

from typing import NoReturn

from pydantic_ai import ModelRetry

from approval_guard._call.outcome import NotRun


def as_model_retry(not_run: NotRun) -> NoReturn:
    """Raise ``ModelRetry`` with the NotRun's sentence (an ``on_not_run`` for Pydantic AI).

    ::

        @agent.tool
        @guard.requires_approval(timeout="30m", on_not_run=as_model_retry)
        async def issue_refund(ctx: RunContext[Deps], payment_id: str, amount: int) -> str: ...

    The model gets the sentence as a retry prompt, which counts against the
    tool's ``retries``; past them the run fails (``UnexpectedModelBehavior``).
    The default, ``on_not_run=str``, gives the sentence as the tool's result.

    Args:
        not_run: The call that did not run.
    """
    raise ModelRetry(str(not_run))
