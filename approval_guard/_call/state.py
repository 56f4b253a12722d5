"""One guarded call's state, shared by the parts of the rules that act on it.

The rules are split by what they do (``rules.py`` drives, ``create.py`` creates,
``poll.py`` polls, ``verdict.py`` reads answers, ``withdraw.py`` cancels, ``execute.py``
runs the tool); each is a set of functions over one :class:`CallState`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import attrs

from approval_guard._call.backoff import RetryPolicy
from approval_guard._call.events import NO_EVENTS, Emitter
from approval_guard._call.ops import CallGen, CallPlan, Timings
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._codec.clock import Clock, ClockSample
from approval_guard._codec.wire_models import ApprovalRequest, Decision
from approval_guard._ledger.protocol import Ledger
from approval_guard._options.advice import advice_for
from approval_guard._transport.answer import Answer, TransportError


@attrs.frozen
class Edit:
    """A reviewer's approved edit, checked: what the tool gets and what the reviewer set."""

    #: The top-level names whose values changed, sorted.
    changed: tuple[str, ...]
    #: name -> the value the tool receives (converted to its annotation).
    values: dict[str, Any]
    #: The whole arguments object that runs, as JSON (the approved one).
    after: dict[str, Any]


@attrs.define(eq=False)
class CallState:
    """What one call knows while its rules run: its plan, its collaborators, what it has seen."""

    plan: CallPlan
    ledger: Ledger
    clock: Clock
    policy: RetryPolicy
    abandon: threading.Event | None
    timings: Timings
    #: Drives late work (withdrawing a request made after the call ended) in the background:
    #: given what makes the generator, so that a driver cut short can be replaced.
    spawn: Callable[[Callable[[], CallGen]], None]
    emit: Emitter = NO_EVENTS
    request: ApprovalRequest | None = attrs.field(init=False, default=None)
    last_status: str | None = attrs.field(init=False, default=None)
    # A create was sent whose answer never came: the request may exist unseen.
    maybe_created: bool = attrs.field(init=False, default=False)
    lost_create: bool = attrs.field(init=False, default=False)
    # The tool itself raised: its exception is the caller's, never turned into a NotRun.
    tool_raised: bool = attrs.field(init=False, default=False)
    # A create attempt may outlive the rules' interest in it (a driver stops waiting for
    # an abandonable one). Its answer is then the only news of the request it made, so
    # whoever sees it last withdraws that request. Guarded by late_lock.
    late_lock: threading.Lock = attrs.field(init=False, factory=threading.Lock)
    ended: bool = attrs.field(init=False, default=False)
    in_flight: int = attrs.field(init=False, default=0)
    unseen: list[Answer] = attrs.field(init=False, factory=list)
    handed_off: bool = attrs.field(init=False, default=False)
    # The replay ran out of time with no create in flight here: the provider may still
    # make the request, so ``end`` starts a late withdrawal of it.
    withdraw_later: bool = attrs.field(init=False, default=False)
    # A cancel was answered 200 by a body that did not show the request cancelled.
    withdraw_unconfirmed: bool = attrs.field(init=False, default=False)
    withdraw_lock: threading.Lock = attrs.field(init=False, factory=threading.Lock)
    # The reviewer's approved edit, checked and converted (None: run as sent).
    edit: Edit | None = attrs.field(init=False, default=None)

    def not_run(
        self,
        reason: Reason,
        message: str,
        *,
        decision: Decision | None = None,
        edit: bool = False,
    ) -> NotRun:
        """The outcome ``reason``: ``edit`` says a reviewer's edit is why (for the advice).

        ``decision``: the person's decision this outcome follows from; its note and
        who made it go into the NotRun.
        """
        request = self.request
        return NotRun(
            reason=reason,
            message=message,
            tool=self.plan.tool,
            arguments=self.plan.arguments,
            request_id=None if request is None else request.id,
            status=self.last_status,
            note=None if decision is None else decision.note,
            advice=advice_for(reason, self.plan.messages, edit=edit),
            decided_by=None if decision is None else decision.decided_by,
        )

    def left(self, until: float) -> float:
        return until - self.clock.monotonic()

    def abandoned(self) -> bool:
        return self.abandon is not None and self.abandon.is_set()

    def sampled(self, answer: Answer, request: ApprovalRequest) -> ClockSample:
        """The answer's clock sample, knowing the provider timestamps its body carried."""
        decision = request.decision
        return answer.sample.knowing(
            request.created_at,
            request.cancelled_at,
            None if decision is None else decision.decided_at,
        )


def failure(exc: BaseException) -> str:
    """A failed exchange in a few words: never the exception's text unless it is ours."""
    if isinstance(exc, TransportError):
        return exc.message
    return f"unexpected {type(exc).__name__}"


def seconds_text(seconds: float) -> str:
    if not seconds < 1e9:  # also inf and NaN
        return "more than 30 years"
    if seconds < 10:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s"
