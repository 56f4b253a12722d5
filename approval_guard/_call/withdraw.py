"""Withdrawing a request nobody will wait for, including one whose create answer was lost.

Best effort and never raising: :func:`cancel` withdraws a pending request,
first recovering its id by replaying the create (same key, same bytes) when
the create's answer never came. A create still in flight when the call ends
is handed off: its own late answer withdraws the request it made. So is one
the provider is still processing after the driver stopped waiting for it (a
Ctrl-C cut the exchange on the calling thread): when the replay runs out of
time with the key still in use, it goes on in the background once the call
has ended.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

import attrs

from approval_guard._call.ops import CallGen, Exchange, Op, Ran
from approval_guard._call.retry import Again, GaveUp, retrying
from approval_guard._call.state import CallState, failure
from approval_guard._call.verdict import check_echo, original_request, status_in
from approval_guard._codec.wire import CANCELLED, PENDING
from approval_guard._codec.wire_models import ApprovalRequest, parse_request
from approval_guard._transport import exchange as _exchange
from approval_guard._transport.answer import Answer

log = logging.getLogger("approval_guard")

#: The longest pause between two replays of a create whose request is being recovered
#: (a ``Retry-After`` is still honoured).
RECOVER_PAUSE_CAP = 1.0


def withdrawal(call: CallState) -> str:
    """The end of a sentence saying what became of a request we stopped waiting for."""
    if call.request is None:
        if call.handed_off:
            return "; the request being created is withdrawn as soon as the provider answers."
        return "."
    if call.last_status == CANCELLED:
        return "; the pending request was cancelled."
    if call.last_status == PENDING and call.withdraw_unconfirmed:
        return (
            "; the provider's answer to the cancel did not show the request withdrawn, so "
            "it may stay open until its deadline."
        )
    if call.last_status == PENDING:
        return "; the pending request could not be withdrawn and stays open until its deadline."
    return "."


def cancel(
    call: CallState, reason: str, *, hand_off: bool = False, late: bool = False
) -> Generator[Op, Any, None]:
    """Best effort: withdraw a request that may still be pending; never raises.

    A lost answer, a reset, a 429 or a 5xx is tried again (the cancel is
    idempotent) while a pause fits in ``cancel_retry_window``; every attempt
    ends within ``cancel_timeout`` of the first, so giving up stays prompt
    however the provider fails. ``hand_off``: a create still in flight is
    left to withdraw its own request when answered, instead of waiting for
    it. ``late``: the call has returned, so the harness limit no longer binds.
    """
    timings = call.timings
    first = call.clock.monotonic()
    # Never past the harness's own limit: return_margin is the cancel's time too.
    end = first + timings.cancel_timeout
    if late:
        # Nobody waits any more: a create still being processed (its answer lost, or
        # its exchange cut off as its event loop ended) is waited for as it would be.
        end += timings.create_timeout
    else:
        end = min(end, call.plan.harness_end - timings.cancel_reserve)
    retry_end = min(first + timings.cancel_retry_window, end)
    if call.request is None:
        take_unseen(call)
    if call.request is None and call.maybe_created:
        recover_end = end
        if hand_off and creating(call):
            # A create still in flight is waited for about a second, not the whole
            # budget: after that, its own answer withdraws the request it made.
            recover_end = min(end, first + timings.cancel_retry_window)
        in_use = yield from recover(call, recover_end)
        if call.request is None:
            take_unseen(call)
        if call.request is None and creating(call):
            call.handed_off = True
            log.info(
                "the create for %s is still in flight; its request is withdrawn when "
                "it is answered",
                call.plan.tool,
            )
            return
        if call.request is None and in_use and not late:
            # The provider is still making the request (its create held up, the
            # exchange that sent it cut off by a Ctrl-C): nobody would hear of it, so
            # the replay goes on in the background, with the late budget, once the
            # call has ended (``end``).
            call.handed_off = call.withdraw_later = True
            log.info(
                "the create for %s is still being processed; its request is withdrawn in "
                "the background",
                call.plan.tool,
            )
            return
    request = call.request
    if request is None or request.status != PENDING:
        return
    request_id = request.id

    def attempt() -> Generator[Op, Any, Again | None]:
        try:
            answer: Answer = yield Exchange(
                _exchange.cancel(request_id, reason=reason, timeout=max(0.05, call.left(end)))
            )
        except Exception as exc:  # a failed cancel, whatever it raised: tried again
            log.warning("could not cancel %s: %s", request_id, failure(exc))
            return Again()
        if answer.ok:
            # Only a body showing this request cancelled says it was: a 200 that shows
            # it still pending, decided, or something else entirely does not.
            status = status_in(answer.body, request_id)
            if status is None:
                call.withdraw_unconfirmed = True
                log.warning("cancel of %s: the answer does not show it cancelled", request_id)
                return None
            call.last_status = status
            if status == CANCELLED:
                log.info("approval request cancelled: request_id=%s (%s)", request_id, reason)
            return None
        log.warning("cancel of %s: %s", request_id, answer.describe())
        if call.policy.retryable(answer, creating=False):
            return Again(answer.retry_after)
        current = answer.body.get("request") if isinstance(answer.body, dict) else None
        status = status_in(current, request_id)
        if status is not None:
            call.last_status = status
        return None

    yield from retrying(
        attempt, policy=call.policy, clock=call.clock, until=retry_end, abandonable=False
    )


def recover(call: CallState, end: float) -> Generator[Op, Any, bool]:
    """Learn the id of a request whose create answer was lost: replay the create.

    The same key and bytes return the request made the first time (the
    provider keeps keys for a day), so it can be cancelled. A create still
    in flight at the provider answers 409 ``idempotency_key_in_use``: asked
    again after a pause, within ``end``. A 422 for a harness retry's key
    names the original request, adopted as at create. Returns True when
    ``end`` came first after the key was found in use: the request is yet to exist.
    """
    in_use = False

    def attempt() -> Generator[Op, Any, Again | None]:
        nonlocal in_use
        try:
            answer: Answer = yield create_op(call, max(0.05, call.left(end)))
        except Exception as exc:  # a failed replay, whatever it raised: tried again
            log.warning("could not recover the request for %s: %s", call.plan.tool, failure(exc))
            return Again()
        if answer.ok:
            check_echo(call, answer, expect_id=None)
            return None
        if answer.status == 422 and answer.error[0] == "idempotency_key_reused":
            original = original_request(call, answer)
            if isinstance(original, ApprovalRequest) and call.request is None:
                call.request = original
                call.last_status = original.status
            return None
        if not call.policy.retryable(answer, creating=True):
            return None
        in_use = in_use or answer.status == 409  # the key in use (the only 409 retried)
        return Again(answer.retry_after)

    # A key in use is freed as soon as the first create is answered (at once, for a
    # provider): asked again within RECOVER_PAUSE_CAP, not after a backoff grown to
    # seconds, so the request it made is not left open that long after it exists.
    policy = call.policy
    if policy.cap > RECOVER_PAUSE_CAP:
        policy = attrs.evolve(policy, cap=RECOVER_PAUSE_CAP)
    result = yield from retrying(
        attempt, policy=policy, clock=call.clock, until=end, abandonable=False
    )
    return in_use and isinstance(result, GaveUp)


def create_op(call: CallState, timeout: float, *, orphanable: bool = False) -> Exchange:
    """One create attempt: always the same key and the same bytes.

    ``orphanable``: the driver may stop waiting for it (the harness abandons
    the call, the task is cancelled) and leave it to finish; its late answer
    is then withdrawn.
    """
    plan = call.plan
    spec = _exchange.create(plan.body, plan.idempotency_key, timeout=timeout, by=plan.local_end)
    if not orphanable:
        return Exchange(spec)
    return Exchange(spec, abandonable=True, tracker=_CreateTracker(call))


class _CreateTracker:
    """Keeps count of a create in flight; withdraws what it made if the call has ended."""

    def __init__(self, call: CallState) -> None:
        self._call = call

    def begin(self) -> None:
        with self._call.late_lock:
            self._call.in_flight += 1

    def end(self, answer: Answer | None) -> None:
        call = self._call
        with call.late_lock:
            call.in_flight -= 1
            late = call.ended
            if not late and answer is not None:
                call.unseen.append(answer)  # until the rules take it (see `took`)
        if late:
            _withdraw_late(call, answer)


def creating(call: CallState) -> bool:
    """Whether a create attempt is still running (one the driver stopped waiting for)."""
    with call.late_lock:
        return call.in_flight > 0


def took(call: CallState, answer: Answer) -> None:
    """The rules have seen ``answer``: it is no longer news for a late withdrawal."""
    with call.late_lock:
        unseen = call.unseen
        if len(unseen) == 1 and unseen[0] is answer:
            call.unseen = []  # the usual case, without a comprehension's frame
        else:
            call.unseen = [a for a in unseen if a is not answer]


def take_unseen(call: CallState) -> None:
    """Learn from create answers that came back after the driver stopped waiting."""
    with call.late_lock:
        answers, call.unseen = call.unseen, []
    for answer in answers:
        if answer.ok and call.request is None:
            check_echo(call, answer, expect_id=None)


def end(call: CallState) -> None:
    """The call is over: any create answer still untaken is withdrawn, in the background.

    So is a request a replay could not yet find (``withdraw_later``): the late
    withdrawal replays the create again (which covers any untaken answer too).
    """
    with call.late_lock:
        call.ended = True
        leftovers, call.unseen = call.unseen, []
    if call.withdraw_later:
        _withdraw_late(call, None)
        return
    for answer in leftovers:
        _withdraw_late(call, answer)


def _withdraw_late(call: CallState, answer: Answer | None) -> None:
    """Withdraw the request a create made after the call ended (None: its answer was lost).

    The cancel is driven in the background (``call.spawn``), after the outcome
    was returned; never raises.
    """
    try:
        with call.withdraw_lock:
            if answer is not None and answer.ok:
                try:
                    late_id: str | None = parse_request(answer.body).id
                except Exception:
                    late_id = None
                known = call.request
                if known is not None and known.id == late_id and call.last_status != PENDING:
                    return  # already withdrawn (or decided) by the call itself
                check_echo(call, answer, expect_id=None)
            elif answer is not None and not (
                call.lost_create or answer.error[0] == "idempotency_key_in_use"
            ):
                return  # this attempt made nothing, and no earlier one may have
            else:
                call.maybe_created = True
        call.spawn(lambda: _withdrawing(call))
    except BaseException:
        log.exception("could not withdraw the late request for %s", call.plan.tool)


def _withdrawing(call: CallState) -> CallGen:
    yield from cancel(call, "the call had ended when its create was answered", late=True)
    return Ran(None)  # nothing runs: only the driver's protocol needs an outcome
