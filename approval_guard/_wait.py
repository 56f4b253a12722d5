"""The rules of one guarded call, written once, as a generator that asks for I/O.

:func:`guarded_call` creates the approval request, long-polls it, accounts
for every deadline, cancels what nobody will wait for, checks the decision
and the execution record, and, last of all, the approval's expiry. It never
does I/O itself: it *yields* operations (:class:`Blocking`, :class:`Sleep`,
:class:`Invoke`) and a driver performs them. ``drive_sync`` and
``drive_async`` are the only two drivers, so sync and async tools obey one
copy of the rules.

A driver reports abandonment by throwing :class:`Abandoned` into the
generator at an abandonable operation (a create, a poll or a backoff sleep);
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
from ._clock import (
    EXPIRY_SAFETY,
    Clock,
    ClockSample,
    certainly_expired,
    plausibly_expired,
    still_valid,
)
from ._duration import format_duration
from ._ledger import Ledger
from ._outcome import NotRun, Reason
from ._wire import (
    APPROVED,
    CANCELLED,
    DENIED,
    EXPIRED,
    PENDING,
    STATUSES,
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
#: A long poll answered "pending" sooner than this was not held: the next poll waits.
EARLY_POLL = 1.0
#: A clock sample from a round trip longer than this is re-read (wait=0) when the
#: approval's expiry is in doubt.
SHORT_ROUND_TRIP = 1.0
#: "In doubt": seconds left, by the loose sample, under EXPIRY_SAFETY plus this.
EXPIRY_DOUBT = 0.5
#: The re-read's whole budget.
REREAD_TIMEOUT = 2.0


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
    #: The call's arguments as JSON again, made from the objects the tool will be given
    #: (None: not checked). They must still be what was sent: the caller's objects may
    #: have changed while the call waited.
    current_arguments: Callable[[], Any] | None = None


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
        # When a pause did not fit because the provider asked for it: (seconds asked, left).
        self.asked_later: tuple[float, float] | None = None
        # The tool itself raised: its exception is the caller's, never turned into a NotRun.
        self.tool_raised = False
        # A create attempt may outlive the rules' interest in it (a driver stops waiting for
        # an abandonable one). Its answer is then the only news of the request it made, so
        # whoever sees it last withdraws that request. Guarded by late_lock.
        self.late_lock = threading.Lock()
        self.ended = False
        self.in_flight = 0
        self.unseen: list[Answer] = []
        self.handed_off = False
        # A cancel was answered 200 by a body that did not show the request cancelled.
        self.withdraw_unconfirmed = False
        self.withdraw_lock = threading.Lock()  # one late withdrawal at a time

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
            return (yield from self.rules())
        finally:
            self.end()

    def rules(self) -> CallGen:
        tool = self.plan.tool
        try:
            obtained = yield from self.obtain()
        except GeneratorExit:
            raise  # the generator is being closed: no more operations may be asked for
        except Abandoned:
            yield from self.cancel("the harness abandoned the call", hand_off=True)
            return self.not_run(
                Reason.CANCELLED,
                f"The call to {tool} was abandoned by the harness before a decision "
                f"arrived, so it did not run{self.withdrawal()}",
            )
        except asyncio.CancelledError:
            # The task is being cancelled, not the process: a create still in flight
            # is withdrawn when it is answered, rather than holding the cancel up.
            yield from self.cancel("the waiting call was interrupted", hand_off=True)
            raise
        except Exception:
            # Defence in depth: nothing a provider sends may make a guarded call raise.
            log.exception("unexpected error while waiting for approval of %s", tool)
            yield from self.cancel("the waiting call failed")
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"An unexpected error ended the wait for approval, so {tool} did not "
                f"run{self.withdrawal()}",
            )
        except BaseException:
            # KeyboardInterrupt: the process may exit next, so the cancel is done now.
            yield from self.cancel("the waiting call was interrupted")
            raise
        if isinstance(obtained, NotRun):
            return obtained
        try:
            return (yield from self.execute(obtained))
        except GeneratorExit:
            raise
        except Exception:
            if self.tool_raised:
                raise  # the tool's own exception is the caller's
            log.exception("unexpected error before %s could start", tool)
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"An unexpected error came before {tool} could start, so it did not run.",
            )

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
            except Abandoned:
                raise
            except Exception as exc:  # whatever the exchange raised, it is a failed poll
                log.warning("poll of %s failed (%s); retrying", request_id, _failure(exc))
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
                # Nobody will wait for this request any more: withdraw it if the provider lets us.
                yield from self.cancel("the provider refused to read the request")
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The approval provider stopped answering for the request "
                    f"({answer.describe()}), so {self.plan.tool} did not run"
                    f"{self.withdrawal()}",
                )
            checked = self.check_echo(answer, expect_id=request_id)
            if isinstance(checked, NotRun):
                yield from self.cancel("the provider's answer did not match the call")
                return checked
            request, sample = checked, self.sampled(answer, checked)
            round_trip = answer.sample.received - answer.sample.sent
            if request.status == PENDING and wait > 0 and round_trip < EARLY_POLL:
                # A long poll answered "pending" at once (a provider that ignores wait=):
                # back off as for a failure, or polling it is a storm.
                if not (yield from self.pause(next(delays), None, wait_end)):
                    return (yield from self.give_up_waiting())
                continue
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
                answer: Answer = yield self.create_op(min(CREATE_TIMEOUT, left), orphanable=True)
            except Abandoned:
                raise
            except Exception as exc:  # whatever the exchange raised, it is a failed create
                self.lost_create = True
                why = _failure(exc)
                log.warning("creating a request for %s failed (%s); retrying", plan.tool, why)
                if not (yield from self.pause(next(delays), None, plan.local_end)):
                    yield from self.cancel("no answer to the create arrived in time")
                    if isinstance(exc, TransportError):
                        text = f"The approval provider could not be reached ({why})"
                    else:
                        text = f"The approval provider's answers could not be used ({why})"
                    return self.not_run(
                        Reason.NOT_OBTAINED,
                        f"{text}, so {plan.tool} did not run{self.withdrawal()}",
                    )
                continue
            self.took(answer)
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
                return checked, self.sampled(answer, checked)
            if self.policy.retryable(answer, creating=True):
                log.warning("creating a request for %s: %s; retrying", plan.tool, answer.describe())
                if not (yield from self.pause(next(delays), answer.retry_after, plan.local_end)):
                    asked = self.asked_later
                    yield from self.cancel("no answer to the create arrived in time")
                    if asked is not None:
                        return self.not_run(
                            Reason.NOT_OBTAINED,
                            f"The approval provider asked to be called again in "
                            f"{_seconds_text(asked[0])}, more than the {_seconds_text(asked[1])} "
                            f"the harness has left, so {plan.tool} did not run"
                            f"{self.withdrawal()}",
                        )
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
            if answer.status == 422 and answer.error[0] == "idempotency_key_reused":
                return self.reused_key(answer)
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The approval provider refused the request ({answer.describe()}), so "
                f"{plan.tool} did not run.",
            )

    def reused_key(self, answer: Answer) -> NotRun | tuple[ApprovalRequest, ClockSample]:
        """A 422 for this call's key: adopt the original request if it asks exactly this.

        A harness retry with less time left sends a different ``timeout`` and
        nothing else; the request first made with the key is the same call.
        Its deadline maps as usual; our own end stays this call's limit.
        """
        tool = self.plan.tool
        original = self.original_request(answer)
        if isinstance(original, ApprovalRequest):
            self.request = original
            self.last_status = original.status
            log.info(
                "adopted the request first created with this idempotency key: tool=%s "
                "request_id=%s status=%s",
                tool,
                original.id,
                original.status,
            )
            return original, self.sampled(answer, original)
        if original == _DIFFERENT:
            why = "was first used to ask about a different tool or different arguments"
        elif original == _UNREADABLE:
            why = "was first used for a request that the answer did not describe usably"
        else:
            why = "was first used for a different request, which the answer did not include"
        return self.not_run(
            Reason.NOT_OBTAINED,
            f"The approval provider refused the request ({answer.describe()}): this call's "
            f"idempotency key {why}, so {tool} did not run and nothing new was created.",
        )

    def original_request(self, answer: Answer) -> ApprovalRequest | str:
        """The request a 422 ``idempotency_key_reused`` names, if it is exactly this call."""
        body = answer.body
        raw = body.get("request") if isinstance(body, dict) else None
        if raw is None:
            return _ABSENT
        try:
            original = parse_request(raw)
            same = original.tool == self.plan.tool and same_json(
                original.arguments, self.plan.arguments
            )
        except Exception:  # WireError, or a structure too deep to compare
            return _UNREADABLE
        return original if same else _DIFFERENT

    def create_op(self, timeout: float, *, orphanable: bool = False) -> Blocking[Answer]:
        """One create attempt: always the same key and the same bytes.

        ``orphanable``: the driver may stop waiting for it (the harness abandons
        the call, the task is cancelled); its late answer is then withdrawn.
        """
        if orphanable:
            return Blocking(functools.partial(self.attempt_create, timeout), abandonable=True)
        plan = self.plan
        return Blocking(
            functools.partial(
                self.client.create, plan.body, plan.idempotency_key, timeout=timeout
            )
        )

    def attempt_create(self, timeout: float) -> Answer:
        """One create, in the driver's helper thread; withdraws what it made if nobody waits."""
        with self.late_lock:
            self.in_flight += 1
        answer: Answer | None = None
        try:
            answer = self.client.create(self.plan.body, self.plan.idempotency_key, timeout=timeout)
            return answer
        finally:
            with self.late_lock:
                self.in_flight -= 1
                late = self.ended
                if not late and answer is not None:
                    self.unseen.append(answer)  # until the rules take it (see `took`)
            if late:
                self.withdraw_late(answer)

    def creating(self) -> bool:
        """Whether a create attempt is still running in a helper thread."""
        with self.late_lock:
            return self.in_flight > 0

    def took(self, answer: Answer) -> None:
        with self.late_lock:
            self.unseen = [a for a in self.unseen if a is not answer]

    def take_unseen(self) -> None:
        """Learn from create answers that came back after the driver stopped waiting."""
        with self.late_lock:
            answers, self.unseen = self.unseen, []
        for answer in answers:
            if answer.ok and self.request is None:
                self.check_echo(answer, expect_id=None)

    def end(self) -> None:
        """The call is over: any create answer still untaken is withdrawn from a helper."""
        with self.late_lock:
            self.ended = True
            leftovers, self.unseen = self.unseen, []
        for answer in leftovers:
            _threads.start(
                functools.partial(self.withdraw_late, answer), name="approval_guard-withdraw"
            )

    def withdraw_late(self, answer: Answer | None) -> None:
        """Withdraw the request a create made after the call ended (None: its answer was lost).

        Runs in a helper thread, after the outcome was returned; never raises.
        """
        try:
            with self.withdraw_lock:
                if answer is not None and answer.ok:
                    try:
                        late_id: str | None = parse_request(answer.body).id
                    except Exception:
                        late_id = None
                    known = self.request
                    if known is not None and known.id == late_id and self.last_status != PENDING:
                        return  # already withdrawn (or decided) by the call itself
                    self.check_echo(answer, expect_id=None)
                elif answer is not None and not (
                    self.lost_create or answer.error[0] == "idempotency_key_in_use"
                ):
                    return  # this attempt made nothing, and no earlier one may have
                else:
                    self.maybe_created = True
                drive_sync(self.withdrawing(), _no_invoke, self.clock, None)
        except BaseException:
            log.exception("could not withdraw the late request for %s", self.plan.tool)

    def withdrawing(self) -> CallGen:
        yield from self.cancel("the call had ended when its create was answered", late=True)
        return Ran(None)  # nothing runs: only the driver's protocol needs an outcome

    def sampled(self, answer: Answer, request: ApprovalRequest) -> ClockSample:
        """The answer's clock sample, knowing the provider timestamps its body carried."""
        decision = request.decision
        return answer.sample.knowing(
            request.created_at,
            request.cancelled_at,
            None if decision is None else decision.decided_at,
        )

    def pause(
        self, delay: float, retry_after: float | None, until: float, *, abandonable: bool = True
    ) -> Generator[Op, Any, bool]:
        """Back off before a retry; False if the wait would pass ``until``.

        Never shorter than the policy's floor, whatever ``Retry-After`` says.
        """
        self.asked_later = None
        seconds = self.policy.pause(delay, retry_after)
        left = self.left(until)
        if seconds >= left:
            if retry_after is not None and retry_after >= left:
                self.asked_later = (retry_after, max(0.0, left))
            return False
        yield Sleep(seconds, abandonable=abandonable)
        return True

    def check_echo(self, answer: Answer, *, expect_id: str | None) -> ApprovalRequest | NotRun:
        """Parse an answer and check it is about exactly the call we sent."""
        try:
            request = parse_request(answer.body)
        except Exception as exc:  # WireError, or anything else a body can provoke
            text = str(exc) if isinstance(exc, WireError) else f"unexpected {type(exc).__name__}"
            log.error("unusable answer from the provider: %s", text)
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The approval provider's answer could not be understood ({text}), so "
                f"{self.plan.tool} did not run.",
            )
        mismatch = None
        if expect_id is not None and request.id != expect_id:
            mismatch = "a different request id"
        elif request.tool != self.plan.tool:
            mismatch = "a different tool name"
        else:
            try:
                same = same_json(request.arguments, self.plan.arguments)
            except RecursionError:
                same = False
            if not same:
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
        asked = self.asked_later
        yield from self.cancel("no decision arrived within the time the caller could wait")
        tool = self.plan.tool
        if self.last_status in (APPROVED, DENIED, EXPIRED):
            # Decided (or expired) just as the wait ended: say so, and what we know.
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"No decision reached the call within the time the harness allows, so {tool} "
                f"did not run; the provider now reports the request as {self.last_status}.",
            )
        if asked is not None:
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The approval provider asked to be called again in {_seconds_text(asked[0])}, "
                f"more than the {_seconds_text(asked[1])} left to wait for a decision, so "
                f"{tool} did not run and nobody denied it{self.withdrawal()}",
            )
        return self.not_run(
            Reason.NOT_OBTAINED,
            f"No decision arrived within the time the harness allows, so {tool} "
            f"did not run and nobody denied it{self.withdrawal()}",
        )

    def withdrawal(self) -> str:
        """The end of a sentence saying what became of a request we stopped waiting for."""
        if self.request is None:
            if self.handed_off:
                return "; the request being created is withdrawn as soon as the provider answers."
            return "."
        if self.last_status == CANCELLED:
            return "; the pending request was cancelled."
        if self.last_status == PENDING and self.withdraw_unconfirmed:
            return (
                "; the provider's answer to the cancel did not show the request withdrawn, so "
                "it may stay open until its deadline."
            )
        if self.last_status == PENDING:
            return "; the pending request could not be withdrawn and stays open until its deadline."
        return "."

    def cancel(
        self, reason: str, *, hand_off: bool = False, late: bool = False
    ) -> Generator[Op, Any, None]:
        """Best effort: withdraw a request that may still be pending; never raises.

        A lost answer, a reset, a 429 or a 5xx is tried again (the cancel is
        idempotent) while a pause fits in ``CANCEL_RETRY_WINDOW``; every attempt
        ends within ``CANCEL_TIMEOUT`` of the first, so giving up stays prompt
        however the provider fails. ``hand_off``: a create still in flight is
        left to withdraw its own request when answered, instead of waiting for
        it. ``late``: the call has returned, so the harness limit no longer binds.
        """
        first = self.clock.monotonic()
        # Never past the harness's own limit: return_margin is the cancel's time too.
        end = first + CANCEL_TIMEOUT
        if not late:
            end = min(end, self.plan.harness_end - CANCEL_RESERVE)
        retry_end = min(first + CANCEL_RETRY_WINDOW, end)
        if self.request is None:
            self.take_unseen()
        if self.request is None and self.maybe_created:
            recover_end = end
            if hand_off and self.creating():
                # A create still in flight is waited for about a second, not the whole
                # budget: after that, its own answer withdraws the request it made.
                recover_end = min(end, first + CANCEL_RETRY_WINDOW)
            yield from self.recover(recover_end)
            if self.request is None:
                self.take_unseen()
            if self.request is None and self.creating():
                self.handed_off = True
                log.info(
                    "the create for %s is still in flight; its request is withdrawn when "
                    "it is answered",
                    self.plan.tool,
                )
                return
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
            except Exception as exc:  # a failed cancel, whatever it raised: tried again
                log.warning("could not cancel %s: %s", request_id, _failure(exc))
                if (yield from self.pause(next(delays), None, retry_end, abandonable=False)):
                    continue
                return
            if answer.ok:
                # Only a body showing this request cancelled says it was: a 200 that shows
                # it still pending, decided, or something else entirely does not.
                status = self.status_in(answer.body, request_id)
                if status is None:
                    self.withdraw_unconfirmed = True
                    log.warning("cancel of %s: the answer does not show it cancelled", request_id)
                    return
                self.last_status = status
                if status == CANCELLED:
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
            status = self.status_in(current, request_id)
            if status is not None:
                self.last_status = status
            return

    @staticmethod
    def status_in(body: Any, request_id: str) -> str | None:
        """The status of ``request_id`` as a body describes it, or None if it does not."""
        try:
            request = parse_request(body)
        except Exception:
            return None
        if request.id != request_id or request.status not in STATUSES:
            return None
        return request.status

    def recover(self, end: float) -> Generator[Op, Any, None]:
        """Learn the id of a request whose create answer was lost: replay the create.

        The same key and bytes return the request made the first time (the
        provider keeps keys for a day), so it can be cancelled. A create still
        in flight at the provider answers 409 ``idempotency_key_in_use``: asked
        again after a pause, within ``end``. A 422 for a harness retry's key
        names the original request, adopted as at create.
        """
        plan = self.plan
        delays = self.policy.delays()
        while True:
            try:
                answer: Answer = yield self.create_op(max(0.05, self.left(end)))
            except Exception as exc:  # a failed replay, whatever it raised: tried again
                log.warning("could not recover the request for %s: %s", plan.tool, _failure(exc))
                retry_after = None
            else:
                if answer.ok:
                    self.check_echo(answer, expect_id=None)
                    return
                if answer.status == 422 and answer.error[0] == "idempotency_key_reused":
                    original = self.original_request(answer)
                    if isinstance(original, ApprovalRequest) and self.request is None:
                        self.request = original
                        self.last_status = original.status
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
            if decision.arguments is not None and not _same_or_too_deep(
                decision.arguments, self.plan.arguments
            ):
                # API 1.1: only names sent as editable may change, and this call sends none;
                # what was approved is not what would run.
                log.error("the approval of %s changes the call's arguments", request.id)
                return self.not_run(
                    Reason.NOT_OBTAINED,
                    f"The approval came with arguments changed from those of the call, which "
                    f"offered none for editing, so {tool} did not run.",
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
            refused = yield from self.last_checks(request, sample)
        except GeneratorExit:
            raise
        except BaseException:
            # Nothing started: the claim is given back.
            yield from self.release(request.id)
            raise
        if refused is not None:
            yield from self.release(request.id)
            return refused
        try:
            value = yield Invoke()
        except GeneratorExit:
            raise
        except BaseException as exc:
            self.tool_raised = True
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

    def last_checks(
        self, request: ApprovalRequest, sample: ClockSample
    ) -> Generator[Op, Any, NotRun | None]:
        """With the claim held: abandonment, then the expiry, judged by the provider's clock."""
        tool = self.plan.tool
        decision = request.decision
        assert decision is not None and decision.expires_at is not None
        expires_at, note = decision.expires_at, decision.note
        confirmed = yield from self.confirm_clock(request, sample)
        # A task cancelled while the claim was being written is told so here,
        # before the call (the caller gives the claim back, since nothing started).
        yield Checkpoint()
        if self.abandoned():
            return self.abandoned_after_approval()
        if isinstance(confirmed, NotRun):
            return confirmed
        changed = self.arguments_changed()
        if changed is not None:
            return changed
        # The very last check before the call.
        now = self.clock.monotonic()
        valid, left = still_valid(expires_at, confirmed, now)
        if valid:
            return None
        # The first sample may prove the expiry a re-read with a lagging Date cannot.
        if plausibly_expired(expires_at, confirmed, now) or certainly_expired(
            expires_at, sample, now
        ):
            return self.not_run(
                Reason.APPROVAL_EXPIRED,
                f"The approval for {tool} expired at {format_timestamp(expires_at)} before "
                "the call could start, so it did not run.",
                note=note,
            )
        if left is None and confirmed.lagging:
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The provider's Date header was behind the timestamps in its own answer (a "
                f"cache or a lagging clock), so the approval's expiry could not be checked and "
                f"{tool} did not run.",
                note=note,
            )
        if left is None:
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The provider's answer had no usable Date header, so the approval's expiry "
                f"could not be checked and {tool} did not run.",
                note=note,
            )
        # Not expired by our best estimate: only too close to its end to be sure.
        return self.not_run(
            Reason.NOT_OBTAINED,
            f"The approval for {tool} could not be confirmed as still valid in time (it "
            f"ends at {format_timestamp(expires_at)} by the provider's clock, too close to "
            "tell from the provider's answers), so it did not run.",
            note=note,
        )

    def arguments_changed(self) -> NotRun | None:
        """A NotRun if the objects the tool would get are no longer what the reviewer saw."""
        current = self.plan.current_arguments
        if current is None:
            return None
        try:
            same = same_json(current(), self.plan.arguments)
        except Exception:  # no longer serialisable, or too deep: not what was sent either
            same = False
        if same:
            return None
        log.error("the arguments of %s changed while it waited for approval", self.plan.tool)
        return self.not_run(
            Reason.NOT_OBTAINED,
            f"The call's arguments changed after they were sent for approval, so {self.plan.tool} "
            "did not run: what would run is not what the reviewer saw.",
        )

    def confirm_clock(
        self, request: ApprovalRequest, sample: ClockSample
    ) -> Generator[Op, Any, ClockSample | NotRun]:
        """A sharper clock sample when the one in hand is too loose to tell.

        An answer's Date was written somewhere inside its round trip, so after
        a long poll the provider's clock is only known to within the whole poll:
        an approval still valid for seconds can look expired. When that doubt
        is what stands between the approval and the call, a ``wait=0`` re-read
        (a short round trip) gives a fresh sample to judge by.
        """
        decision = request.decision
        assert decision is not None and decision.expires_at is not None
        _, left = still_valid(decision.expires_at, sample, self.clock.monotonic())
        # A Date behind the answer's own timestamps (a cache) says nothing of the
        # provider's clock now: a fresh answer may carry a usable one.
        if not sample.lagging and (
            left is None
            or left > EXPIRY_SAFETY + EXPIRY_DOUBT
            or sample.received - sample.sent <= SHORT_ROUND_TRIP
        ):
            return sample
        timeout = min(REREAD_TIMEOUT, self.left(self.plan.local_end))
        if timeout <= 0:
            return sample
        try:
            answer: Answer = yield Blocking(
                functools.partial(self.client.read, request.id, wait=0, timeout=timeout),
                limit=timeout,
            )
        except Exception as exc:
            log.warning("re-reading %s for its clock failed (%s)", request.id, _failure(exc))
            return sample
        if not answer.ok:
            log.warning("re-reading %s for its clock: %s", request.id, answer.describe())
            return sample
        fresh = self.check_echo(answer, expect_id=request.id)
        if isinstance(fresh, NotRun):
            return fresh
        if fresh.status != APPROVED or fresh.decision != decision:
            log.error("the provider's re-read of %s shows another decision", request.id)
            return self.not_run(
                Reason.NOT_OBTAINED,
                f"The provider's latest answer no longer showed the same approval, so "
                f"{self.plan.tool} did not run.",
                note=decision.note,
            )
        return self.sampled(answer, fresh)

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


_ABSENT, _UNREADABLE, _DIFFERENT = "absent", "unreadable", "different"


def _failure(exc: BaseException) -> str:
    """A failed exchange in a few words: never the exception's text unless it is ours."""
    if isinstance(exc, TransportError):
        return exc.message
    return f"unexpected {type(exc).__name__}"


def _seconds_text(seconds: float) -> str:
    if not seconds < 1e9:  # also inf and NaN
        return "more than 30 years"
    if seconds < 10:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s"


def _no_invoke() -> Any:
    raise AssertionError("a withdrawal never starts the tool")


_NUMBERS = (int, float)


def _same_or_too_deep(a: Any, b: Any) -> bool:
    """:func:`same_json`, False for structures too deep to compare."""
    try:
        return same_json(a, b)
    except RecursionError:
        return False


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
    # A task cancel that arrived during an operation that must finish (the
    # record, a clock re-read): thrown in at the next operation, where the rules
    # can still give back what they hold. (A create is abandonable: its late
    # answer withdraws the request it made.)
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
