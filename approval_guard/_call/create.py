"""Creating the request: one idempotent create, retried in the time left, adopted if replayed."""

from __future__ import annotations

import functools
import logging
from collections.abc import Generator
from typing import Any, cast

from approval_guard._call.events import RequestCreated
from approval_guard._call.ops import Abandoned, CallPlan, Obtained, Op
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._call.plan import without_redacted
from approval_guard._call.retry import Again, GaveUp, retrying
from approval_guard._call.state import CallState, failure, seconds_text
from approval_guard._call.verdict import check_echo, reused_key
from approval_guard._call.withdraw import cancel, create_op, took, withdrawal
from approval_guard._codec.wire import format_timestamp
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard._transport.answer import Answer, TransportError

log = logging.getLogger("approval_guard")


def create(call: CallState) -> Generator[Op, Any, Obtained]:
    """Create the request, retrying what may be retried; the request made, or why none."""
    plan = call.plan
    if call.abandoned():
        raise Abandoned()
    if plan.timeout < 1 or call.left(plan.local_end) < 1:
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"Too little of the harness's time limit was left to ask for approval, "
            f"so {plan.tool} did not run and no request was created.",
        )
    attempt = functools.partial(create_attempt, call)
    result = cast(
        "Obtained | GaveUp",
        (yield from retrying(attempt, policy=call.policy, clock=call.clock, until=plan.local_end)),
    )
    if not isinstance(result, GaveUp):
        return result
    yield from cancel(call, "no answer to the create arrived in time")
    last = result.last.context
    if isinstance(last, BaseException):
        why = failure(last)
        if isinstance(last, TransportError):
            text = f"The approval provider could not be reached ({why})"
        else:
            text = f"The approval provider's answers could not be used ({why})"
        return call.not_run(
            Reason.NOT_OBTAINED, f"{text}, so {plan.tool} did not run{withdrawal(call)}"
        )
    if result.asked is not None:
        asked, left = result.asked
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The approval provider asked to be called again in {seconds_text(asked)}, more "
            f"than the {seconds_text(left)} the harness has left, so {plan.tool} did not run"
            f"{withdrawal(call)}",
        )
    described = last.describe() if isinstance(last, Answer) else "an error"
    return call.not_run(
        Reason.NOT_OBTAINED,
        f"The approval provider kept answering {described} until the time limit, so "
        f"{plan.tool} did not run{withdrawal(call)}",
    )


def create_attempt(
    call: CallState,
) -> Generator[Op, Any, Obtained | Again]:
    """One create: the request made, a reason to try again, or why there is none."""
    plan = call.plan
    left = call.left(plan.local_end)
    if left <= 0:
        yield from cancel(call, "no answer to the create arrived in time")
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The approval provider could not be reached in time, so {plan.tool} "
            f"did not run{withdrawal(call)}",
        )
    # Until an answer says otherwise, this attempt may have created the request.
    call.maybe_created = True
    try:
        answer: Answer = yield create_op(
            call, min(call.timings.create_timeout, left), orphanable=True
        )
    except Abandoned:
        raise
    except Exception as exc:  # whatever the exchange raised, it is a failed create
        call.lost_create = True
        log.warning("creating a request for %s failed (%s); retrying", plan.tool, failure(exc))
        return Again(context=exc)
    took(call, answer)
    ok = answer.ok
    if not ok:
        # An HTTP error answer means this attempt created nothing (earlier
        # attempts whose answers were lost still may have).
        call.maybe_created = call.lost_create
    if ok:
        checked = check_echo(call, answer, expect_id=None)
        if isinstance(checked, NotRun):
            yield from cancel(call, "the provider's answer did not match the call")
            return checked
        if log.isEnabledFor(logging.INFO):  # format_timestamp is not free
            log.info(
                "approval request created: tool=%s request_id=%s deadline_at=%s "
                "status=%s provider_request_id=%s",
                plan.tool,
                checked.id,
                format_timestamp(checked.deadline_at),
                checked.status,
                answer.provider_request_id,
            )
        created(call, checked, answer)
        return checked, call.sampled(answer, checked)
    if answer.status == 400 and plan.sends_redacted:
        # An older provider refuses API 1.3's ``redacted`` as an unknown field (a
        # 400 creates nothing): the same create without it, at once, same key.
        log.info(
            "the approval provider refused the create for %s (%s); sending it without "
            "'redacted' (API 1.3)",
            plan.tool,
            answer.describe(),
        )
        call.plan = without_redacted(plan)
        return Again(context=answer, fresh=True)
    if call.policy.retryable(answer, creating=True):
        log.warning("creating a request for %s: %s; retrying", plan.tool, answer.describe())
        return Again(answer.retry_after, context=answer)
    log.error(
        "the approval provider refused the request for %s: %s (provider_request_id=%s)",
        plan.tool,
        answer.describe(),
        answer.provider_request_id,
    )
    if answer.status == 422 and answer.error[0] == "idempotency_key_reused":
        adopted = reused_key(call, answer)
        if not isinstance(adopted, NotRun):
            created(call, adopted[0], answer)
        return adopted
    return call.not_run(
        Reason.NOT_OBTAINED,
        f"The approval provider refused the request ({answer.describe()}), so "
        f"{plan.tool} did not run{_older_provider(plan, answer)}.",
    )


def _older_provider(plan: CallPlan, answer: Answer) -> str:
    """A hint when a 400 names a 1.3 field the call sent: the provider is older than 1.3."""
    sent = [field for field, value in (("batch", plan.batch), ("context", plan.context)) if value]
    if answer.status != 400 or not sent or answer.error[0] != "invalid_request":
        return ""
    if not any(field in answer.error[1] for field in sent):
        return ""
    return (
        f" (the provider may be older than API 1.3, which added {' and '.join(sent)}: "
        "send the call without them, or upgrade the provider)"
    )


def created(call: CallState, request: ApprovalRequest, answer: Answer) -> None:
    """Report the request the call now waits on."""
    if call.emit:
        call.emit(
            RequestCreated(
                tool=call.plan.tool,
                request_id=request.id,
                deadline_at=request.deadline_at,
                provider_request_id=answer.provider_request_id,
            )
        )
