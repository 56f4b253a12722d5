"""The rules of one guarded call: create the request, poll it, give up in time.

:func:`guarded_call` is a generator that never does I/O itself: it yields
operations (:mod:`._ops`) for a driver (:mod:`._drive`) to perform. It asks
for the request, long-polls it within every deadline, and hands a decision
to :mod:`._verdict` to read and an approval to :mod:`._execute` to run;
whatever nobody will wait for any more, :mod:`._withdraw` cancels. Retries
go through the one loop in :mod:`._retry`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import math
import threading
from collections.abc import Callable, Generator
from typing import Any, Union, cast

import attrs

from approval_guard._call.backoff import RetryPolicy
from approval_guard._call.events import (
    NO_EVENTS,
    ArgumentsEdited,
    Decided,
    Emitter,
    RequestCreated,
    StillWaiting,
)
from approval_guard._call.execute import execute
from approval_guard._call.ops import Abandoned, CallGen, CallPlan, Exchange, Op, Sleep, Timings
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._call.retry import Again, GaveUp, retrying
from approval_guard._call.state import CallState, failure, seconds_text
from approval_guard._call.verdict import check_echo, decide, reused_key
from approval_guard._call.withdraw import cancel, create_op, end, took, withdrawal
from approval_guard._codec.clock import Clock, ClockSample
from approval_guard._codec.wire import (
    APPROVED,
    DENIED,
    EXPIRED,
    PENDING,
    ApprovalRequest,
    format_timestamp,
)
from approval_guard._ledger.memory import Ledger
from approval_guard._options.advice import advice_for
from approval_guard._options.edit import apply_edit
from approval_guard._transport import exchange as _exchange
from approval_guard._transport.answer import Answer, TransportError

log = logging.getLogger("approval_guard")

Obtained = Union[NotRun, tuple[ApprovalRequest, ClockSample]]  # noqa: UP007
_DEFAULT_TIMINGS = Timings()


def guarded_call(
    plan: CallPlan,
    ledger: Ledger,
    clock: Clock,
    policy: RetryPolicy,
    abandon: threading.Event | None = None,
    *,
    spawn: Callable[[Callable[[], CallGen]], None],
    timings: Timings | None = None,
    emit: Emitter = NO_EVENTS,
) -> CallGen:
    """The rules of one call, as a generator of operations for a driver.

    ``spawn`` drives late work in the background, ``_drive.late_sync``: a request
    whose create was answered after the call ended is withdrawn there.
    """
    call = CallState(plan, ledger, clock, policy, abandon, timings or _DEFAULT_TIMINGS, spawn, emit)
    return _run(call)


def _run(call: CallState) -> CallGen:
    try:
        return (yield from _rules(call))
    finally:
        end(call)


def _rules(call: CallState) -> CallGen:
    tool = call.plan.tool
    try:
        obtained = yield from _obtain(call)
    except GeneratorExit:
        raise  # the generator is being closed: no more operations may be asked for
    except Abandoned:
        yield from cancel(call, "the harness abandoned the call", hand_off=True)
        return call.not_run(
            Reason.CANCELLED,
            f"The call to {tool} was abandoned by the harness before a decision "
            f"arrived, so it did not run{withdrawal(call)}",
        )
    except asyncio.CancelledError:
        # The task is being cancelled, not the process: a create still in flight
        # is withdrawn when it is answered, rather than holding the cancel up.
        yield from cancel(call, "the waiting call was interrupted", hand_off=True)
        raise
    except Exception:
        # Defence in depth: nothing a provider sends may make a guarded call raise.
        log.exception("unexpected error while waiting for approval of %s", tool)
        yield from cancel(call, "the waiting call failed")
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"An unexpected error ended the wait for approval, so {tool} did not "
            f"run{withdrawal(call)}",
        )
    except BaseException:
        # KeyboardInterrupt: the process may exit next, so the cancel is done now.
        yield from cancel(call, "the waiting call was interrupted")
        raise
    if isinstance(obtained, NotRun):
        return obtained
    try:
        return (yield from execute(call, *obtained))
    except GeneratorExit:
        raise
    except Exception:
        if call.tool_raised:
            raise  # the tool's own exception is the caller's
        log.exception("unexpected error before %s could start", tool)
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"An unexpected error came before {tool} could start, so it did not run.",
        )


def _obtain(call: CallState) -> Generator[Op, Any, Obtained]:
    """Create and wait. Returns an approval to check and use, or why there is none."""
    created = yield from _create(call)
    if isinstance(created, NotRun):
        return created
    request, sample = created
    # Wait until the provider's deadline (plus a margin to read its final state)
    # or our own end, whichever is first.
    wait_end = call.plan.local_end
    mapped = sample.to_local(request.deadline_at)
    if mapped is not None:
        wait_end = min(wait_end, mapped + call.plan.deadline_margin)
    poll = _Poll(call, request, sample, wait_end)
    # (mypy joins NotRun and a tuple to object when solving retrying's T: named here.)
    result = cast(
        "Obtained | GaveUp",
        (yield from retrying(poll.attempt, policy=call.policy, clock=call.clock, until=wait_end)),
    )
    if isinstance(result, GaveUp):
        return (yield from _give_up_waiting(call, result.asked))
    return result


class _Poll:
    """The long-poll loop's state between attempts: the request as last read."""

    def __init__(
        self, call: CallState, request: ApprovalRequest, sample: ClockSample, wait_end: float
    ) -> None:
        self.call = call
        self.request = request
        self.sample = sample
        self.wait_end = wait_end
        self.zero_waits = 0

    def attempt(self) -> Generator[Op, Any, Obtained | Again]:
        """One poll: the decision read, a request to poll again, or why there is none."""
        call, plan = self.call, self.call.plan
        if self.request.status != PENDING:
            return self.decided()
        left = call.left(self.wait_end)
        if left <= 0:
            return (yield from _give_up_waiting(call, None))
        wait = max(0, math.floor(min(plan.poll_wait, left - 1.0)))
        if wait == 0 and self.zero_waits:
            # Under a second left: a wait=0 poll returns at once; do not spin on it.
            yield Sleep(min(call.timings.zero_wait_pause, left))
            if call.left(self.wait_end) <= 0:
                return (yield from _give_up_waiting(call, None))
        self.zero_waits += wait == 0
        timeout = min(wait + call.timings.read_slack, left)
        request_id = self.request.id
        log.debug("polling %s (%s) wait=%ss", plan.tool, request_id, wait)
        try:
            answer: Answer = yield Exchange(
                _exchange.read(request_id, wait=wait, timeout=timeout), abandonable=True
            )
        except Abandoned:
            raise
        except Exception as exc:  # whatever the exchange raised, it is a failed poll
            log.warning("poll of %s failed (%s); retrying", request_id, failure(exc))
            return Again()
        if not answer.ok:
            if call.policy.retryable(answer, creating=False):
                log.warning("poll of %s: %s; retrying", request_id, answer.describe())
                return Again(answer.retry_after)
            log.error("the provider refused to read %s: %s", request_id, answer.describe())
            # Nobody will wait for this request any more: withdraw it if the provider lets us.
            yield from cancel(call, "the provider refused to read the request")
            return call.not_run(
                Reason.NOT_OBTAINED,
                f"The approval provider stopped answering for the request "
                f"({answer.describe()}), so {plan.tool} did not run{withdrawal(call)}",
            )
        checked = check_echo(call, answer, expect_id=request_id)
        if isinstance(checked, NotRun):
            yield from cancel(call, "the provider's answer did not match the call")
            return checked
        self.request, self.sample = checked, call.sampled(answer, checked)
        if checked.status != PENDING:
            return self.decided()
        if call.emit:
            call.emit(
                StillWaiting(
                    tool=plan.tool,
                    request_id=request_id,
                    seconds_left=max(0.0, call.left(self.wait_end)),
                    deadline_at=checked.deadline_at,
                    approvals=None if checked.quorum is None else checked.quorum[0],
                    approvals_required=None if checked.quorum is None else checked.quorum[1],
                )
            )
        round_trip = answer.sample.received - answer.sample.sent
        if wait > 0 and round_trip < call.timings.early_poll:
            # A long poll answered "pending" at once (a provider that ignores wait=):
            # back off as for a failure, or polling it is a storm.
            return Again()
        return Again(fresh=True)

    def decided(self) -> Obtained:
        call, request = self.call, self.request
        tool = call.plan.tool
        decision = request.decision
        log.info(
            "approval request decided: tool=%s request_id=%s status=%s decided_by=%s",
            tool,
            request.id,
            request.status,
            # Scrubbed, bounded and without control characters since the wire (_wire.py).
            "-" if decision is None or decision.decided_by is None else decision.decided_by,
        )
        if (
            call.emit
            and decision is not None
            and request.status in (APPROVED, DENIED)
            and decision.status == request.status
        ):
            call.emit(
                Decided(
                    tool=tool,
                    request_id=request.id,
                    status=request.status,
                    note=decision.note,
                    decided_by=decision.decided_by,
                )
            )
        result = decide(call, request, self.sample)
        if isinstance(result, NotRun):
            return result
        edit = apply_edit(call, request)
        if isinstance(edit, NotRun):
            return edit
        if edit is not None:
            call.edit = edit
            call.emit(
                ArgumentsEdited(
                    tool=tool,
                    request_id=request.id,
                    # Copies: a callback that scrubs its event must not change what
                    # later checks compare with, or the record's digest of what ran.
                    before=copy.deepcopy(call.plan.arguments),
                    after=copy.deepcopy(edit.after),
                    changed=edit.changed,
                )
            )
        return result


def _create(call: CallState) -> Generator[Op, Any, Obtained]:
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
    attempt = functools.partial(_create_attempt, call)
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


def _create_attempt(
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
    if not answer.ok:
        # An HTTP error answer means this attempt created nothing (earlier
        # attempts whose answers were lost still may have).
        call.maybe_created = call.lost_create
    if answer.ok:
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
        f"{plan.tool} did not run.",
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


def _give_up_waiting(
    call: CallState, asked: tuple[float, float] | None
) -> Generator[Op, Any, NotRun]:
    yield from cancel(call, "no decision arrived within the time the caller could wait")
    tool = call.plan.tool
    if call.last_status in (APPROVED, DENIED, EXPIRED):
        # Decided (or expired) just as the wait ended: say so, and what we know.
        late = call.not_run(
            Reason.NOT_OBTAINED,
            f"No decision reached the call within the time the harness allows, so {tool} "
            f"did not run; the provider now reports the request as {call.last_status}.",
        )
        if call.last_status == DENIED:
            # "Nobody denied it" would contradict the sentence before it, and invite a retry.
            late = attrs.evolve(late, advice=advice_for(Reason.DENIED, call.plan.messages))
        return late
    if asked is not None:
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The approval provider asked to be called again in {seconds_text(asked[0])}, "
            f"more than the {seconds_text(asked[1])} left to wait for a decision, so "
            f"{tool} did not run and nobody denied it{withdrawal(call)}",
        )
    return call.not_run(
        Reason.NOT_OBTAINED,
        f"No decision arrived within the time the harness allows, so {tool} "
        f"did not run and nobody denied it{withdrawal(call)}",
    )
