"""The rules of one guarded call: create the request, poll it, give up in time.

:func:`guarded_call` is a generator that never does I/O itself: it yields
operations (``ops.py``) for a driver (``approval_guard/_transport/``) to
perform. It asks for the request (``create.py``), long-polls it within every
deadline (``poll.py``), and hands a decision to ``verdict.py`` to read and an
approval to ``execute.py`` to run; whatever nobody will wait for any more,
``withdraw.py`` cancels. Retries go through the one loop in ``retry.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Generator
from typing import Any, cast

from approval_guard._call.backoff import RetryPolicy
from approval_guard._call.create import create
from approval_guard._call.events import NO_EVENTS, Emitter
from approval_guard._call.execute import execute
from approval_guard._call.ops import Abandoned, CallGen, CallPlan, Obtained, Op, Timings
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._call.poll import Poll, decided, give_up_waiting
from approval_guard._call.retry import GaveUp, retrying
from approval_guard._call.state import CallState
from approval_guard._call.withdraw import cancel, end, withdrawal
from approval_guard._codec.clock import Clock
from approval_guard._codec.wire import PENDING
from approval_guard._ledger.protocol import Ledger

log = logging.getLogger("approval_guard")

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
    return _rules(call)


def _rules(call: CallState) -> CallGen:
    # One generator for the whole call, its end included: every operation a call
    # yields passes through each level of ``yield from`` on its way to the driver.
    try:
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
    finally:
        end(call)


def _obtain(call: CallState) -> Generator[Op, Any, Obtained]:
    """Create and wait. Returns an approval to check and use, or why there is none."""
    created = yield from create(call)
    if isinstance(created, NotRun):
        return created
    request, sample = created
    if request.status != PENDING:
        # Decided already (an approval at once): what the first poll attempt would
        # return, with no wait to plan and no retry loop.
        return decided(call, request, sample)
    # Wait until the provider's deadline (plus a margin to read its final state)
    # or our own end, whichever is first.
    wait_end = call.plan.local_end
    mapped = sample.to_local(request.deadline_at)
    if mapped is not None:
        wait_end = min(wait_end, mapped + call.plan.deadline_margin)
    poll = Poll(call, request, sample, wait_end)
    # (mypy joins NotRun and a tuple to object when solving retrying's T: named here.)
    result = cast(
        "Obtained | GaveUp",
        (yield from retrying(poll.attempt, policy=call.policy, clock=call.clock, until=wait_end)),
    )
    if isinstance(result, GaveUp):
        return (yield from give_up_waiting(call, result.asked))
    return result
