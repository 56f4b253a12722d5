"""Waiting for the decision: long polls until the person decides or the time left runs out."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Generator
from typing import Any

import attrs

from approval_guard._call.edit import apply_edit
from approval_guard._call.events import ArgumentsEdited, Decided, StillWaiting
from approval_guard._call.ops import Abandoned, Exchange, Obtained, Op, Sleep
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._call.retry import Again
from approval_guard._call.state import CallState, failure, seconds_text
from approval_guard._call.verdict import check_echo, decide
from approval_guard._call.withdraw import cancel, withdrawal
from approval_guard._codec.clock import ClockSample
from approval_guard._codec.wire import APPROVED, DENIED, EXPIRED, PENDING
from approval_guard._codec.wire_models import ApprovalRequest, Decision
from approval_guard._options.advice import advice_for
from approval_guard._transport import exchange as _exchange
from approval_guard._transport.answer import Answer

log = logging.getLogger("approval_guard")


class Poll:
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
            return (yield from give_up_waiting(call, None))
        wait = max(0, math.floor(min(plan.poll_wait, left - 1.0)))
        if wait == 0 and self.zero_waits:
            # Under a second left: a wait=0 poll returns at once; do not spin on it.
            yield Sleep(min(call.timings.zero_wait_pause, left))
            if call.left(self.wait_end) <= 0:
                return (yield from give_up_waiting(call, None))
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
        # A batched wait (API 1.2) that ended with no news of it: pending, as last read.
        unchanged = answer.unchanged
        checked = self.request if unchanged else check_echo(call, answer, expect_id=request_id)
        if isinstance(checked, NotRun):
            yield from cancel(call, "the provider's answer did not match the call")
            return checked
        if not unchanged:
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
        if wait > 0 and round_trip < call.timings.early_poll and not unchanged:
            # A long poll answered "pending" at once (a provider that ignores wait=):
            # back off as for a failure, or polling it is a storm.
            return Again()
        return Again(fresh=True)

    def decided(self) -> Obtained:
        return decided(self.call, self.request, self.sample)


def decided(call: CallState, request: ApprovalRequest, sample: ClockSample) -> Obtained:
    """A request no longer pending, read: the approval to check and use, or why there is none."""
    tool = call.plan.tool
    decision = request.decision
    log.info(
        "approval request decided: tool=%s request_id=%s status=%s decided_by=%s%s",
        tool,
        request.id,
        request.status,
        # Scrubbed, bounded and without control characters since the wire (_wire.py).
        "-" if decision is None or decision.decided_by is None else decision.decided_by,
        # Most answers name no grant nor rule: told apart without a call.
        ""
        if decision is None
        or (decision.grant is None and not (decision.decided_by or "").startswith("rule:"))
        else standing_text(decision),
    )
    if (
        call.emit
        and decision is not None
        and request.status in (APPROVED, DENIED)
        and decision.status == request.status
    ):
        grant = decision.grant
        call.emit(
            Decided(
                tool=tool,
                request_id=request.id,
                status=request.status,
                note=decision.note,
                decided_by=decision.decided_by,
                grant_id=None if grant is None else grant.id,
                granted_by=None if grant is None else grant.granted_by,
                rule=decision.rule,
            )
        )
    result = decide(call, request, sample)
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


def standing_text(decision: Decision) -> str:
    """The log line's end naming a grant (`` grant=G granted_by=alice``) or a rule, else ``""``."""
    grant = decision.grant
    if grant is not None:
        return f" grant={grant.id} granted_by={grant.granted_by or '-'}"
    rule = decision.rule
    return "" if rule is None else f" rule={rule}"


def give_up_waiting(
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
