"""Running an approved call at most once: claim the record, check the expiry, invoke, record.

The claim is taken before the last checks, so two workers holding the same
approval cannot both pass them; a check that refuses gives the claim back,
since nothing started. The expiry is judged by the provider's clock, as late
as possible: the very last thing before the tool starts.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Generator
from typing import Any

from approval_guard._call.edit import log_edit_run
from approval_guard._call.events import ToolFinished, ToolStarted
from approval_guard._call.ops import Blocking, CallGen, Checkpoint, Exchange, Invoke, Op, Ran
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._call.state import CallState, failure
from approval_guard._call.verdict import check_echo, same_decision
from approval_guard._codec.clock import (
    EXPIRY_SAFETY,
    ClockSample,
    certainly_expired,
    plausibly_expired,
    still_valid,
)
from approval_guard._codec.serialize import dumps, same_json
from approval_guard._codec.wire import APPROVED, format_timestamp
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard._transport import exchange as _exchange
from approval_guard._transport.answer import Answer
from approval_guard.exceptions import LedgerError

log = logging.getLogger("approval_guard")

# Operations without state of their own (frozen), made once rather than per call.
_CHECKPOINT = Checkpoint()
_AS_SENT = Invoke(edits=None)


def execute(call: CallState, request: ApprovalRequest, sample: ClockSample) -> CallGen:
    """Claim, check, run and record one approved call."""
    plan = call.plan
    decision = request.decision
    assert decision is not None and decision.expires_at is not None
    if call.abandoned():
        return _abandoned_after_approval(call)
    edit = call.edit
    # What runs, as the reviewer saw or set it (redacted values as their markers).
    if edit is None and plan.arguments_json is not None:
        digest = hashlib.sha256(plan.arguments_json).hexdigest()  # written once, at the plan
    else:
        digest = arguments_digest(plan.arguments if edit is None else edit.after)
    try:
        claimed = yield Blocking(
            lambda: call.ledger.claim(
                request.id, tool=plan.tool, worker=plan.worker, arguments_digest=digest
            )
        )
    except Exception as exc:
        log.error("the execution record could not be claimed for %s: %s", request.id, exc)
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The execution record could not be reached to confirm {plan.tool} had not "
            "already run, so it did not run.",
            decision=decision,
        )
    if type(claimed) is not bool and inspect.isawaitable(claimed):
        # A coroutine (or any awaitable) is truthy, yet it has claimed nothing: the
        # record was never written, so running would allow a second run.
        close = getattr(claimed, "close", None)
        if inspect.iscoroutine(claimed) and callable(close):
            close()  # never awaited: closed, so it warns nobody
        log.error(
            "the execution record's claim for %s returned a %s, not a bool",
            request.id,
            type(claimed).__name__,
        )
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The execution record's claim gave no answer that confirms {plan.tool} had "
            "not already run, so it did not run.",
            decision=decision,
        )
    if not claimed:
        return call.not_run(
            Reason.ALREADY_EXECUTED,
            f"This approved call to {plan.tool} has already started or run once, so it did "
            "not run again.",
            decision=decision,
        )
    try:
        refused = yield from _last_checks(call, request, sample)
    except GeneratorExit:
        raise
    except BaseException:
        # Nothing started: the claim is given back.
        yield from _release(call, request.id)
        raise
    if refused is not None:
        yield from _release(call, request.id)
        return refused
    if edit is not None:
        log_edit_run(plan, request.id, edit)
    try:
        value = yield _AS_SENT if edit is None else Invoke(edits=edit.values)
    except GeneratorExit:
        raise
    except BaseException as exc:
        call.tool_raised = True
        call.emit(ToolFinished(tool=plan.tool, request_id=request.id, error=type(exc).__name__))
        error = f"{type(exc).__name__}: {exc}"
        try:
            yield Blocking(lambda: call.ledger.fail(request.id, error[:1000]))
        except Exception:
            log.exception("could not mark %s as failed in the execution record", request.id)
        raise
    if call.emit:
        call.emit(ToolFinished(tool=plan.tool, request_id=request.id))
    try:
        yield Blocking(lambda: call.ledger.finish(request.id))
    except Exception:
        log.exception("could not mark %s as finished in the execution record", request.id)
    return Ran(value)


def arguments_digest(arguments: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the arguments that run, for the record."""
    return hashlib.sha256(dumps(arguments)).hexdigest()


def _last_checks(
    call: CallState, request: ApprovalRequest, sample: ClockSample
) -> Generator[Op, Any, NotRun | None]:
    """With the claim held: abandonment, then the expiry, judged by the provider's clock."""
    tool = call.plan.tool
    decision = request.decision
    assert decision is not None and decision.expires_at is not None
    expires_at = decision.expires_at
    # (A generator only when a re-read is needed: most samples are sharp already.)
    confirmed: ClockSample | NotRun = sample
    if _clock_in_doubt(call, request, sample):
        confirmed = yield from _confirm_clock(call, request, sample)
    # A task cancelled while the claim was being written is told so here,
    # before the call (the caller gives the claim back, since nothing started).
    yield _CHECKPOINT
    if call.abandoned():
        return _abandoned_after_approval(call)
    if isinstance(confirmed, NotRun):
        return confirmed
    changed = _arguments_changed(call)
    if changed is not None:
        return changed
    # Reported before the expiry check, not after: a callback that blocks must not
    # let the tool start on an approval that expired while it ran.
    if call.emit:
        call.emit(ToolStarted(tool=tool, request_id=request.id))
    # The very last check before the call.
    now = call.clock.monotonic()
    valid, left = still_valid(expires_at, confirmed, now)
    if valid:
        return None
    # The first sample may prove the expiry a re-read with a lagging Date cannot.
    if plausibly_expired(expires_at, confirmed, now) or certainly_expired(expires_at, sample, now):
        return call.not_run(
            Reason.APPROVAL_EXPIRED,
            f"The approval for {tool} expired at {format_timestamp(expires_at)} before "
            "the call could start, so it did not run.",
            decision=decision,
        )
    if left is None and confirmed.lagging:
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The provider's Date header was behind the timestamps in its own answer (a "
            f"cache or a lagging clock), so the approval's expiry could not be checked and "
            f"{tool} did not run.",
            decision=decision,
        )
    if left is None:
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The provider's answer had no usable Date header, so the approval's expiry "
            f"could not be checked and {tool} did not run.",
            decision=decision,
        )
    # Not expired by our best estimate: only too close to its end to be sure.
    return call.not_run(
        Reason.NOT_OBTAINED,
        f"The approval for {tool} could not be confirmed as still valid in time (it "
        f"ends at {format_timestamp(expires_at)} by the provider's clock, too close to "
        "tell from the provider's answers), so it did not run.",
        decision=decision,
    )


def _arguments_changed(call: CallState) -> NotRun | None:
    """A NotRun if the objects the tool would get are no longer what the reviewer saw."""
    current = call.plan.current_arguments
    if current is None:
        return None
    try:
        same = same_json(current(), call.plan.arguments)
    except Exception:  # no longer serialisable, or too deep: not what was sent either
        same = False
    if same:
        return None
    log.error("the arguments of %s changed while it waited for approval", call.plan.tool)
    return call.not_run(
        Reason.NOT_OBTAINED,
        f"The call's arguments changed after they were sent for approval, so {call.plan.tool} "
        "did not run: what would run is not what the reviewer saw.",
    )


def _clock_in_doubt(call: CallState, request: ApprovalRequest, sample: ClockSample) -> bool:
    """Whether the clock sample in hand is too loose to tell the approval's expiry.

    An answer's Date was written somewhere inside its round trip, so after
    a long poll the provider's clock is only known to within the whole poll:
    an approval still valid for seconds can look expired. When that doubt
    is what stands between the approval and the call, a ``wait=0`` re-read
    (a short round trip, :func:`_confirm_clock`) gives a fresh sample to judge by.
    """
    timings = call.timings
    decision = request.decision
    assert decision is not None and decision.expires_at is not None
    # A Date behind the answer's own timestamps (a cache) says nothing of the
    # provider's clock now: a fresh answer may carry a usable one.
    if not sample.lagging:
        if sample.received - sample.sent <= timings.short_round_trip:
            return False  # a sharp sample already (no clock read needed to know it)
        _, left = still_valid(decision.expires_at, sample, call.clock.monotonic())
        if left is None or left > EXPIRY_SAFETY + timings.expiry_doubt:
            return False
    return True


def _confirm_clock(
    call: CallState, request: ApprovalRequest, sample: ClockSample
) -> Generator[Op, Any, ClockSample | NotRun]:
    """A sharper clock sample, when :func:`_clock_in_doubt`: a ``wait=0`` re-read."""
    timings = call.timings
    decision = request.decision
    assert decision is not None
    timeout = min(timings.reread_timeout, call.left(call.plan.local_end))
    if timeout <= 0:
        return sample
    try:
        answer: Answer = yield Exchange(_exchange.read(request.id, wait=0, timeout=timeout))
    except Exception as exc:
        log.warning("re-reading %s for its clock failed (%s)", request.id, failure(exc))
        return sample
    if not answer.ok:
        log.warning("re-reading %s for its clock: %s", request.id, answer.describe())
        return sample
    fresh = check_echo(call, answer, expect_id=request.id)
    if isinstance(fresh, NotRun):
        return fresh
    if (
        fresh.status != APPROVED
        or not same_decision(fresh.decision, decision)
        or fresh.editable != request.editable
    ):
        log.error("the provider's re-read of %s shows another decision", request.id)
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The provider's latest answer no longer showed the same approval, so "
            f"{call.plan.tool} did not run.",
            decision=decision,
        )
    return call.sampled(answer, fresh)


def _abandoned_after_approval(call: CallState) -> NotRun:
    return call.not_run(
        Reason.CANCELLED,
        f"The call to {call.plan.tool} was approved, but the harness had abandoned it "
        "before it could start, so it did not run.",
    )


def _release(call: CallState, request_id: str) -> Generator[Op, Any, None]:
    try:
        yield Blocking(lambda: call.ledger.release(request_id))
    except (LedgerError, Exception):
        # Left as "started": it then counts as run, which is safe.
        log.exception("could not release the claim on %s", request_id)
