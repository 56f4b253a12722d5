"""The rules of one guarded call, written once, as a generator that asks for I/O.

:func:`guarded_call` creates the approval request, long-polls it, accounts
for every deadline, cancels what nobody will wait for, checks the decision
and the execution record, and, last of all, the approval's expiry. It never
does I/O itself: it *yields* operations (:class:`Blocking`, :class:`Sleep`,
:class:`Invoke`) and a driver performs them. ``drive_sync`` and
``drive_async`` are the only two drivers, so sync and async tools obey one
copy of the rules.

A driver reports abandonment by throwing :class:`Abandoned` into the
generator at an abandonable operation (a poll or a backoff sleep);
``KeyboardInterrupt`` and ``asyncio.CancelledError`` are thrown in the same
way and re-raised after the cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar, Union

import attrs

from . import _threads
from ._client import Answer, ProviderClient, RetryPolicy, TransportError
from ._clock import Clock, ClockSample, still_valid
from ._duration import format_duration
from ._ledger import Ledger
from ._outcome import NotRun, Reason
from ._wire import (
    APPROVED,
    CANCELLED,
    DENIED,
    EXPIRED,
    PENDING,
    ApprovalRequest,
    WireError,
    format_timestamp,
    parse_request,
)
from .exceptions import LedgerError

log = logging.getLogger("approval_guard")

T = TypeVar("T")

#: How often a waiting thread looks at the harness's abandon event.
ABANDON_CHECK_INTERVAL = 0.2
#: A long poll's read timeout outlasts its wait by this much.
READ_SLACK = 5.0
#: The pause between wait=0 polls in the last second of a wait.
ZERO_WAIT_PAUSE = 0.25
#: A create's read timeout (the provider answers a create at once).
CREATE_TIMEOUT = 10.0
#: The best-effort cancel's whole budget: every attempt and pause ends inside it.
CANCEL_TIMEOUT = 2.0
#: A failed cancel is tried again only if the pause before it ends within this
#: long of the first attempt, so the last attempt keeps time to be answered.
CANCEL_RETRY_WINDOW = 1.0
#: Kept back from the harness limit when cancelling, to return the outcome.
CANCEL_RESERVE = 0.1


class Abandoned(Exception):
    """Thrown into the call by a driver when the harness abandons it."""


@attrs.frozen
class Blocking(Generic[T]):
    """Run ``fn`` (blocking I/O).

    ``abandonable``: the harness may give up while it runs. ``limit``: seconds
    after which the driver stops waiting for it and throws
    ``TransportError("timeout")`` instead (it then runs in a helper thread).
    """

    fn: Callable[[], T]
    abandonable: bool = False
    limit: float | None = None


@attrs.frozen
class Sleep:
    """Wait ``seconds``; ``abandonable``: the harness may give up meanwhile."""

    seconds: float
    abandonable: bool = True


@attrs.frozen
class Invoke:
    """Start the tool now. The driver sends back its value or throws its exception."""


@attrs.frozen
class Checkpoint:
    """No I/O: a point where a driver may deliver an interruption it had to hold back."""


Op = Union[Blocking[Any], Sleep, Invoke, Checkpoint]  # noqa: UP007 (a runtime alias on 3.10)


@attrs.frozen
class Ran:
    """The tool ran and returned ``value``."""

    value: Any


@attrs.frozen
class CallPlan:
    """Everything one guarded call needs to know, fixed before the first byte is sent."""

    tool: str
    arguments: dict[str, Any]  # as sent (JSON types)
    body: bytes  # the exact bytes of every create attempt
    idempotency_key: str
    timeout: float  # the approval window requested, whole seconds
    started: float  # monotonic
    local_end: float  # monotonic: harness limit less return_margin
    harness_end: float  # monotonic: the harness limit itself
    deadline_margin: float
    poll_wait: float
    worker: str


Outcome = Union[NotRun, Ran]  # noqa: UP007
CallGen = Generator[Op, Any, Outcome]


class _Call:
    """One call's state while the rules run."""

    def __init__(
        self,
        plan: CallPlan,
        client: ProviderClient,
        ledger: Ledger,
        clock: Clock,
        policy: RetryPolicy,
        abandon: threading.Event | None,
    ) -> None:
        self.plan = plan
        self.abandon = abandon
        self.client = client
        self.ledger = ledger
        self.clock = clock
        self.policy = policy
        self.request: ApprovalRequest | None = None
        self.last_status: str | None = None
        # A create was sent whose answer never came: the request may exist unseen.
        self.maybe_created = False
        self.lost_create = False

    # -- outcomes ----------------------------------------------------------

    def not_run(self, reason: Reason, message: str, *, note: str | None = None) -> NotRun:
        request = self.request
        return NotRun(
            reason=reason,
            message=message,
            tool=self.plan.tool,
            arguments=self.plan.arguments,
            request_id=None if request is None else request.id,
            status=self.last_status,
            note=note,
        )

    def left(self, until: float) -> float:
        return until - self.clock.monotonic()

    # -- the whole call ----------------------------------------------------

    def run(self) -> CallGen:
        try:
            obtained = yield from self.obtain()
        except GeneratorExit:
            raise  # the generator is being closed: no more operations may be asked for
        except Abandoned:
            yield from self.cancel("the harness abandoned the call")
            return self.not_run(
                Reason.CANCELLED,
                f"The call to {self.plan.tool} was abandoned by the harness before a decision "
                f"arrived, so it did not run{self.withdrawal()}",
            )
        except BaseException:
            # KeyboardInterrupt, CancelledError, or a bug: nobody will wait for this request.
            yield from self.cancel("the waiting call was interrupted")
            raise
        if isinstance(obtained, NotRun):
            return obtained
        return (yield from self.execute(obtained))

    def obtain(self) -> Generator[Op, Any, NotRun | tuple[ApprovalRequest, ClockSample]]:
        """Create and wait. Returns an approval to check and use, or why there is none."""
        created = yield from self.create()
        if isinstance(created, NotRun):
            return created
        request, sample = created
        # Wait until the provider's deadline (plus a margin to read its final state)
        # or our own end, whichever is first.
        wait_end = self.plan.local_end
        mapped = sample.to_local(request.deadline_at)
        if mapped is not None:
            wait_end = min(wait_end, mapped + self.plan.deadline_margin)
        delays = self.policy.delays()
        zero_waits = 0
        while request.status == PENDING:
            left = self.left(wait_end)
            if left <= 0:
                return (yield from self.give_up_waiting())
            wait = max(0, math.floor(min(self.plan.poll_wait, left - 1.0)))
            if wait == 0 and zero_waits:
                # Under a second left: a wait=0 poll returns at once; do not spin on it.
                yield Sleep(min(ZERO_WAIT_PAUSE, left))
                if self.left(wait_end) <= 0:
                    continue
            zero_waits += wait == 0
            timeout = min(wait + READ_SLACK, left)
            request_id = request.id
            log.debug("polling %s (%s) wait=%ss", self.plan.tool, request_id, wait)
            try:
                answer: Answer = yield Blocking(
                    functools.partial(self.client.read, request_id, wait=wait, timeout=timeout),
                    abandonable=True,
                    limit=timeout,
                )
            except TransportError as exc:
                log.warning("poll of %s failed (%s); retrying", request_id, exc.message)
                if not (yield from self.pause(next(delays), None, wait_end)):
                    return (yield from self.give_up_waiting())
                continue
            if not answer.ok:
                if self.policy.retryable(answer, creating=False):
                    log.warning("poll of %s: %s; retrying", request_id, answer.describe())
                    if not (yield from self.pause(next(delays), answer.retry_after, wait_end)):
                        return (yield from self.give_up_waiting())
                    continue
                log.error("the provider refused to read %s: %s", request_id, answer.describe())
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The approval provider stopped answering for the request "
                    f"({answer.describe()}), so {self.plan.tool} did not run.",
                )
            checked = self.check_echo(answer, expect_id=request_id)
            if isinstance(checked, NotRun):
                yield from self.cancel("the provider's answer did not match the call")
                return checked
            request, sample = checked, answer.sample
            delays = self.policy.delays()
        log.info(
            "approval request decided: tool=%s request_id=%s status=%s",
            self.plan.tool,
            request.id,
            request.status,
        )
        return self.decide(request, sample)

    def create(self) -> Generator[Op, Any, NotRun | tuple[ApprovalRequest, ClockSample]]:
        plan = self.plan
        if self.abandon is not None and self.abandon.is_set():
            raise Abandoned()
        if plan.timeout < 1 or self.left(plan.local_end) < 1:
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"Too little of the harness's time limit was left to ask for approval, "
                f"so {plan.tool} did not run and no request was created.",
            )
        delays = self.policy.delays()
        while True:
            left = self.left(plan.local_end)
            if left <= 0:
                yield from self.cancel("no answer to the create arrived in time")
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The approval provider could not be reached in time, so {plan.tool} "
                    f"did not run{self.withdrawal()}",
                )
            # Until an answer says otherwise, this attempt may have created the request.
            self.maybe_created = True
            try:
                answer: Answer = yield self.create_op(min(CREATE_TIMEOUT, left))
            except TransportError as exc:
                self.lost_create = True
                log.warning(
                    "creating a request for %s failed (%s); retrying", plan.tool, exc.message
                )
                if not (yield from self.pause(next(delays), None, plan.local_end)):
                    yield from self.cancel("no answer to the create arrived in time")
                    return self.not_run(
                        Reason.NOT_OBTAINED,
                        f"The approval provider could not be reached ({exc.message}), so "
                        f"{plan.tool} did not run{self.withdrawal()}",
                    )
                continue
            if not answer.ok:
                # An HTTP error answer means this attempt created nothing (earlier
                # attempts whose answers were lost still may have).
                self.maybe_created = self.lost_create
            if answer.ok:
                checked = self.check_echo(answer, expect_id=None)
                if isinstance(checked, NotRun):
                    yield from self.cancel("the provider's answer did not match the call")
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
                return checked, answer.sample
            if self.policy.retryable(answer, creating=True):
                log.warning("creating a request for %s: %s; retrying", plan.tool, answer.describe())
                if not (yield from self.pause(next(delays), answer.retry_after, plan.local_end)):
                    yield from self.cancel("no answer to the create arrived in time")
                    return self.not_run(
                        Reason.NOT_OBTAINED,
                        f"The approval provider kept answering {answer.describe()} until the "
                        f"time limit, so {plan.tool} did not run{self.withdrawal()}",
                    )
                continue
            log.error(
                "the approval provider refused the request for %s: %s (provider_request_id=%s)",
                plan.tool,
                answer.describe(),
                answer.provider_request_id,
            )
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The approval provider refused the request ({answer.describe()}), so "
                f"{plan.tool} did not run.",
            )

    def create_op(self, timeout: float) -> Blocking[Answer]:
        """One create attempt: always the same key and the same bytes."""
        plan = self.plan
        return Blocking(
            functools.partial(
                self.client.create, plan.body, plan.idempotency_key, timeout=timeout
            )
        )

    def pause(
        self, delay: float, retry_after: float | None, until: float, *, abandonable: bool = True
    ) -> Generator[Op, Any, bool]:
        """Back off before a retry; False if the wait would pass ``until``."""
        if retry_after is not None:
            delay = retry_after
        if delay >= self.left(until):
            return False
        yield Sleep(delay, abandonable=abandonable)
        return True

    def check_echo(self, answer: Answer, *, expect_id: str | None) -> ApprovalRequest | NotRun:
        """Parse an answer and check it is about exactly the call we sent."""
        try:
            request = parse_request(answer.body)
        except WireError as exc:
            log.error("unusable answer from the provider: %s", exc)
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The approval provider's answer could not be understood ({exc}), so "
                f"{self.plan.tool} did not run.",
            )
        mismatch = None
        if expect_id is not None and request.id != expect_id:
            mismatch = "a different request id"
        elif request.tool != self.plan.tool:
            mismatch = "a different tool name"
        elif not same_json(request.arguments, self.plan.arguments):
            mismatch = "different arguments"
        if self.request is None or mismatch is None:
            self.request = request
        self.last_status = request.status
        if mismatch is not None:
            log.error("the provider's answer names %s than the call sent", mismatch)
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The approval provider's answer named {mismatch} than the call sent, so "
                f"{self.plan.tool} did not run.",
            )
        return request

    def give_up_waiting(self) -> Generator[Op, Any, NotRun]:
        yield from self.cancel("no decision arrived within the time the caller could wait")
        tool = self.plan.tool
        if self.last_status in (APPROVED, DENIED, EXPIRED):
            # Decided (or expired) just as the wait ended: say so, and what we know.
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"No decision reached the call within the time the harness allows, so {tool} "
                f"did not run; the provider now reports the request as {self.last_status}.",
            )
        return self.not_run(
            Reason.NOT_OBTAINED,
            f"No decision arrived within the time the harness allows, so {tool} "
            f"did not run and nobody denied it{self.withdrawal()}",
        )

    def withdrawal(self) -> str:
        """The end of a sentence saying what became of a request we stopped waiting for."""
        if self.request is None:
            return "."
        if self.last_status == CANCELLED:
            return "; the pending request was cancelled."
        if self.last_status == PENDING:
            return "; the pending request could not be withdrawn and stays open until its deadline."
        return "."

    def cancel(self, reason: str) -> Generator[Op, Any, None]:
        """Best effort: withdraw a request that may still be pending; never raises.

        A lost answer, a reset, a 429 or a 5xx is tried again (the cancel is
        idempotent) while a pause fits in ``CANCEL_RETRY_WINDOW``; every attempt
        ends within ``CANCEL_TIMEOUT`` of the first, so giving up stays prompt
        however the provider fails.
        """
        first = self.clock.monotonic()
        # Never past the harness's own limit: return_margin is the cancel's time too.
        end = min(first + CANCEL_TIMEOUT, self.plan.harness_end - CANCEL_RESERVE)
        retry_end = min(first + CANCEL_RETRY_WINDOW, end)
        if self.request is None and self.maybe_created:
            yield from self.recover(end)
        request = self.request
        if request is None or request.status != PENDING:
            return
        request_id = request.id
        delays = self.policy.delays()
        while True:
            left = self.left(end)
            try:
                answer: Answer = yield Blocking(
                    functools.partial(
                        self.client.cancel, request_id, reason=reason, timeout=max(0.05, left)
                    )
                )
            except TransportError as exc:
                log.warning("could not cancel %s: %s", request_id, exc.message)
                if (yield from self.pause(next(delays), None, retry_end, abandonable=False)):
                    continue
                return
            except Exception:  # a bug must not hide the outcome we are returning
                log.exception("could not cancel %s", request_id)
                return
            if answer.ok:
                self.last_status = CANCELLED
                log.info("approval request cancelled: request_id=%s (%s)", request_id, reason)
                return
            log.warning("cancel of %s: %s", request_id, answer.describe())
            if self.policy.retryable(answer, creating=False):
                if (yield from self.pause(
                    next(delays), answer.retry_after, retry_end, abandonable=False
                )):
                    continue
                return
            current = answer.body.get("request") if isinstance(answer.body, dict) else None
            status = current.get("status") if isinstance(current, dict) else None
            if isinstance(status, str):
                self.last_status = status
            return

    def recover(self, end: float) -> Generator[Op, Any, None]:
        """Learn the id of a request whose create answer was lost: replay the create.

        The same key and bytes return the request made the first time (the
        provider keeps keys for a day), so it can be cancelled. A create still
        in flight at the provider answers 409 ``idempotency_key_in_use``: asked
        again after a pause, within ``end``.
        """
        plan = self.plan
        delays = self.policy.delays()
        while True:
            try:
                answer: Answer = yield self.create_op(max(0.05, self.left(end)))
            except TransportError as exc:
                log.warning("could not recover the request for %s: %s", plan.tool, exc.message)
                retry_after = None
            except Exception:  # a bug must not hide the outcome we are returning
                log.exception("could not recover the request for %s", plan.tool)
                return
            else:
                if answer.ok:
                    self.check_echo(answer, expect_id=None)
                    return
                if not self.policy.retryable(answer, creating=True):
                    return
                retry_after = answer.retry_after
            if not (yield from self.pause(next(delays), retry_after, end, abandonable=False)):
                return

    def decide(
        self, request: ApprovalRequest, sample: ClockSample
    ) -> NotRun | tuple[ApprovalRequest, ClockSample]:
        tool = self.plan.tool
        decision = request.decision
        note = decision.note if decision is not None else None
        if request.status == APPROVED:
            if decision is None or decision.status != APPROVED:
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The provider reported an approval without an approved decision, so {tool} "
                    "did not run.",
                )
            if decision.expires_at is None:
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The approval carried no expiry time, so its validity could not be checked "
                    f"and {tool} did not run.",
                    note=note,
                )
            return request, sample
        if request.status == DENIED:
            if decision is None or decision.status != DENIED:
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The provider reported a denial without a decision, so {tool} did not run.",
                )
            reason_text = f": {note}" if note else "."
            return self.not_run(
                Reason.DENIED, f"A person denied this call to {tool}{reason_text}", note=note
            )
        if request.status == EXPIRED:
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"Nobody decided on the request before its deadline, so {tool} did not run; "
                "it was not denied.",
            )
        if request.status == CANCELLED:
            return self.not_run(
                Reason.CANCELLED,
                f"The approval request for {tool} was cancelled at the provider, so it did "
                "not run.",
            )
        return self.not_run(
            Reason.NOT_OBTAINED,
            f"The provider reported an unknown status {request.status!r}, so {tool} did not run.",
        )

    def execute(self, obtained: tuple[ApprovalRequest, ClockSample]) -> CallGen:
        request, sample = obtained
        plan = self.plan
        decision = request.decision
        assert decision is not None and decision.expires_at is not None
        note = decision.note
        if self.abandoned():
            return self.abandoned_after_approval()
        try:
            claimed = yield Blocking(
                lambda: self.ledger.claim(request.id, tool=plan.tool, worker=plan.worker)
            )
        except Exception as exc:
            log.error("the execution record could not be claimed for %s: %s", request.id, exc)
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The execution record could not be reached to confirm {plan.tool} had not "
                "already run, so it did not run.",
                note=note,
            )
        if not claimed:
            return self.not_run(
                Reason.ALREADY_EXECUTED,
                f"This approved call to {plan.tool} has already started or run once, so it did "
                "not run again.",
                note=note,
            )
        try:
            # A task cancelled while the claim was being written is told so here,
            # before the call: the claim is given back, since nothing started.
            yield Checkpoint()
        except GeneratorExit:
            raise
        except BaseException:
            yield from self.release(request.id)
            raise
        if self.abandoned():
            yield from self.release(request.id)
            return self.abandoned_after_approval()
        # The very last check before the call: judged by the provider's clock.
        valid, left = still_valid(decision.expires_at, sample, self.clock.monotonic())
        if not valid:
            yield from self.release(request.id)
            if left is None:
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The provider's answer had no usable Date header, so the approval's expiry "
                    f"could not be checked and {plan.tool} did not run.",
                    note=note,
                )
            return self.not_run(
                Reason.APPROVAL_EXPIRED,
                f"The approval for {plan.tool} expired at "
                f"{format_timestamp(decision.expires_at)} before the call could start, so it "
                "did not run.",
                note=note,
            )
        try:
            value = yield Invoke()
        except GeneratorExit:
            raise
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            try:
                yield Blocking(lambda: self.ledger.fail(request.id, error[:1000]))
            except Exception:
                log.exception("could not mark %s as failed in the execution record", request.id)
            raise
        try:
            yield Blocking(lambda: self.ledger.finish(request.id))
        except Exception:
            log.exception("could not mark %s as finished in the execution record", request.id)
        return Ran(value)

    def abandoned(self) -> bool:
        return self.abandon is not None and self.abandon.is_set()

    def abandoned_after_approval(self) -> NotRun:
        return self.not_run(
            Reason.CANCELLED,
            f"The call to {self.plan.tool} was approved, but the harness had abandoned it "
            "before it could start, so it did not run.",
        )

    def release(self, request_id: str) -> Generator[Op, Any, None]:
        try:
            yield Blocking(lambda: self.ledger.release(request_id))
        except (LedgerError, Exception):
            # Left as "started": it then counts as run, which is safe.
            log.exception("could not release the claim on %s", request_id)


_NUMBERS = (int, float)


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1``; ``5`` and ``5.0`` are the same number."""
    kind = type(a)
    if kind is not type(b):
        # Only an int and a float may be the same JSON value (bool is its own type).
        return kind in _NUMBERS and type(b) in _NUMBERS and a == b
    if kind is dict:
        if a.keys() != b.keys():
            return False
        for key, value in a.items():  # noqa: SIM110 (a loop: all() of a genexpr is slower here)
            if not same_json(value, b[key]):
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):  # noqa: SIM110 (as above)
            if not same_json(x, y):
                return False
        return True
    return bool(a == b)


def guarded_call(
    plan: CallPlan,
    client: ProviderClient,
    ledger: Ledger,
    clock: Clock,
    policy: RetryPolicy,
    abandon: threading.Event | None = None,
) -> CallGen:
    """The rules of one call, as a generator of operations for a driver."""
    return _Call(plan, client, ledger, clock, policy, abandon).run()


def requested_timeout(tool_timeout: float, limit: float, margins: float) -> float:
    """``min(tool timeout, harness limit - return_margin - deadline_margin)``, whole seconds."""
    return float(math.floor(min(tool_timeout, limit - margins)))


def describe_clamp(tool: str, asked: float, got: float) -> None:
    log.warning(
        "approval timeout for %s clamped from %s to %s to fit the harness's limit",
        tool,
        format_duration(asked),
        format_duration(got),
    )


# -- drivers -------------------------------------------------------------------


def _wait_abandonable(
    fn: Callable[[], Any], abandon: threading.Event | None, limit: float | None
) -> Any:
    """Run ``fn`` in a helper thread; the caller waits and can give up without killing it.

    A blocking read cannot be interrupted from another thread (psf/requests#5633),
    and a provider that drips its answer never trips a per-read timeout, so the
    waiting thread never blocks in one: it waits on an event that the helper
    sets, looks at ``abandon`` between short waits, and stops at ``limit``.
    """
    outcome = _threads.start(fn, name="approval_guard-poll")
    end = None if limit is None else time.monotonic() + limit
    while True:
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            raise TransportError("timeout", "no complete answer in time")
        slice_ = left
        if abandon is not None:
            slice_ = ABANDON_CHECK_INTERVAL if left is None else min(ABANDON_CHECK_INTERVAL, left)
        if outcome.done.wait(slice_):
            return outcome.result()
        if abandon is not None and abandon.is_set():
            raise Abandoned()


def drive_sync(
    gen: CallGen,
    invoke: Callable[[], Any],
    clock: Clock,
    abandon: threading.Event | None,
) -> Outcome:
    """Perform a call's operations in the calling thread (polls in a helper thread)."""
    to_send: Any = None
    to_throw: BaseException | None = None
    may_abandon = True
    while True:
        try:
            op = gen.send(to_send) if to_throw is None else gen.throw(to_throw)
        except StopIteration as stop:
            outcome: Outcome = stop.value
            return outcome
        try:
            if isinstance(to_throw, (Abandoned, KeyboardInterrupt)):
                may_abandon = False
            to_send, to_throw = None, None
            if isinstance(op, Blocking):
                if op.abandonable or op.limit is not None:
                    watch = abandon if may_abandon and op.abandonable else None
                    to_send = _wait_abandonable(op.fn, watch, op.limit)
                else:
                    to_send = op.fn()
            elif isinstance(op, Sleep):
                watch = abandon if may_abandon and op.abandonable else None
                if clock.sleep(op.seconds, watch):
                    to_throw = Abandoned()
            elif isinstance(op, Invoke):
                to_send = invoke()
        except BaseException as exc:
            to_throw = exc


async def _await_thread(fn: Callable[[], Any], limit: float | None = None) -> Any:
    """Run blocking ``fn`` in its own thread and await it without blocking the loop.

    Not the default executor: it has a handful of workers, and hundreds of
    calls may be waiting on long polls at once. Past ``limit`` seconds it stops
    waiting and raises ``TransportError("timeout")``.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        def settle() -> None:
            if not future.done():
                future.set_result(None)

        with contextlib.suppress(RuntimeError):  # the loop closed while we waited
            loop.call_soon_threadsafe(settle)

    outcome = _threads.start(fn, name="approval_guard-io", on_done=wake)
    if limit is None:
        await future
    else:
        done, _ = await asyncio.wait({future}, timeout=limit)
        if not done:
            future.cancel()
            raise TransportError("timeout", "no complete answer in time")
    return outcome.result()


async def _await_abandonable(awaitable: Any, abandon: threading.Event | None) -> Any:
    task = asyncio.ensure_future(awaitable)
    if abandon is None:
        return await task
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=ABANDON_CHECK_INTERVAL)
            if done:
                return task.result()
            if abandon.is_set():
                raise Abandoned()
    finally:
        if not task.done():
            task.cancel()


async def drive_async(
    gen: CallGen,
    invoke: Callable[[], Any],
    abandon: threading.Event | None,
) -> Outcome:
    """Perform a call's operations on the running event loop, never blocking it.

    Task cancellation is abandonment: the request is cancelled at the provider
    and ``CancelledError`` propagates.
    """
    to_send: Any = None
    to_throw: BaseException | None = None
    may_abandon = True
    # A task cancel that arrived during an operation that must finish (a create,
    # the record): thrown in at the next operation, so a request created in the
    # meantime is known, and cancelled, rather than left pending for nobody.
    deferred: asyncio.CancelledError | None = None
    while True:
        try:
            op = gen.send(to_send) if to_throw is None else gen.throw(to_throw)
        except StopIteration as stop:
            if deferred is not None:
                raise deferred from None
            outcome: Outcome = stop.value
            return outcome
        if isinstance(to_throw, (Abandoned, asyncio.CancelledError, KeyboardInterrupt)):
            may_abandon = False
        to_send, to_throw = None, None
        if deferred is not None and may_abandon:
            to_throw, deferred = deferred, None
            continue
        try:
            if isinstance(op, Blocking):
                watch = abandon if may_abandon and op.abandonable else None
                if op.abandonable and may_abandon:
                    to_send = await _await_abandonable(_await_thread(op.fn, op.limit), watch)
                elif may_abandon:
                    running = asyncio.ensure_future(_await_thread(op.fn, op.limit))
                    while True:
                        try:
                            to_send = await asyncio.shield(running)
                            break
                        except asyncio.CancelledError as exc:
                            if running.cancelled():
                                raise
                            deferred = exc
                else:
                    # Cleanup after a cancel: shield it so a second cancel cannot cut it short.
                    to_send = await asyncio.shield(_await_thread(op.fn, op.limit))
            elif isinstance(op, Sleep):
                watch = abandon if may_abandon and op.abandonable else None
                await _await_abandonable(asyncio.sleep(op.seconds), watch)
            elif isinstance(op, Invoke):
                to_send = invoke()
                if asyncio.iscoroutine(to_send):
                    to_send = await to_send
        except GeneratorExit:
            # This coroutine is being closed (never to be resumed): close the rules too.
            gen.close()
            raise
        except BaseException as exc:
            to_throw = exc
