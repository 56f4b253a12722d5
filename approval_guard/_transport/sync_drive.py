"""The blocking driver: a call's operations with requests, on this thread or one it can leave.

An exchange runs in a helper thread that the caller can stop waiting for only
when that is needed: when the harness may abandon the call meanwhile, or when
the transport cannot keep the exchange's deadline on the calling thread
(``here`` says how it can, see :meth:`~.sync_client.ProviderClient.here`).
Otherwise it runs on the calling thread, with no thread hand-off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from approval_guard._call.ops import (
    Abandoned,
    Blocking,
    CallGen,
    Checkpoint,
    Exchange,
    Invoke,
    Outcome,
    Sleep,
    Timings,
)
from approval_guard._codec.clock import Clock
from approval_guard._transport import threads as _threads
from approval_guard._transport.drive import (
    DEFAULT_TIMINGS,
    Here,
    Late,
    Perform,
    no_invoke,
    timed_out,
    tracked,
)

log = logging.getLogger("approval_guard")


def _wait_abandonable(
    fn: Callable[[], Any],
    abandon: threading.Event | None,
    limit: float,
    clock: Clock,
    interval: float,
) -> Any:
    """Run ``fn`` in a helper thread; the caller waits and can give up without killing it.

    A blocking read cannot be interrupted from another thread (psf/requests#5633),
    and a provider that drips its answer never trips a per-read timeout, so the
    waiting thread never blocks in one: it waits on an event that the helper
    sets, looks at ``abandon`` every ``interval`` seconds, and stops at ``limit``
    (by ``clock``). A Ctrl-C stops the wait too; the exchange goes on alone.
    """
    outcome = _threads.start(fn, name="approval_guard-poll")
    end = clock.monotonic() + limit
    while True:
        left = end - clock.monotonic()
        if left <= 0:
            raise timed_out()
        slice_ = left if abandon is None else min(interval, left)
        if outcome.done.wait(slice_):
            return outcome.result()
        if abandon is not None and abandon.is_set():
            raise Abandoned()


def drive_sync(
    gen: CallGen,
    invoke: Callable[[Invoke], Any],
    clock: Clock,
    abandon: threading.Event | None,
    *,
    perform: Perform,
    here: Here | None = None,
    timings: Timings | None = None,
) -> Outcome:
    """Perform a call's operations in the calling thread (some exchanges in a helper thread).

    ``here``: how the transport performs an exchange on the calling thread within
    its deadline, when it can; used when nothing can abandon the exchange
    meanwhile (or its deadline comes before the harness's abandon event is next
    looked at, so waiting in a helper would end it no sooner).
    """
    interval = (timings or DEFAULT_TIMINGS).abandon_check_interval
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
            if to_throw is not None:
                if isinstance(to_throw, (Abandoned, KeyboardInterrupt)):
                    may_abandon = False
                to_throw = None
            to_send = None
            # Exact types first, the commonest ops; subclasses below.
            if type(op) is Blocking:  # the execution record: the commonest, and the cheapest
                to_send = op.fn()
            elif type(op) is Invoke:
                to_send = invoke(op)
            elif type(op) is Checkpoint:
                pass  # nothing is held back here: an interruption is thrown where it comes
            elif isinstance(op, Exchange):
                watch = abandon if may_abandon and op.abandonable else None
                inline = None
                if here is not None and (watch is None or op.spec.timeout <= interval):
                    inline = here(op.spec)
                if op.tracker is not None:
                    op.tracker.begin()
                if inline is not None:
                    to_send = tracked(op, inline)()
                else:
                    to_send = _wait_abandonable(
                        tracked(op, perform), watch, op.spec.timeout, clock, interval
                    )
            elif isinstance(op, Blocking):
                to_send = op.fn()
            elif isinstance(op, Sleep):
                watch = abandon if may_abandon and op.abandonable else None
                if clock.sleep(op.seconds, watch):
                    to_throw = Abandoned()
            elif isinstance(op, Invoke):
                to_send = invoke(op)
        except BaseException as exc:
            to_throw = exc


def late_sync(
    perform: Perform, clock: Clock, timings: Timings | None, here: Here | None = None
) -> Callable[[Late], None]:
    """Late work (withdrawing a request made after its call ended) in a helper thread.

    For async tools too: late work is rare and comes after the call has returned,
    when its event loop may be ending (``asyncio.run`` destroys a task made
    while it shuts down), so it never depends on that loop.
    """

    def spawn(make: Late) -> None:
        def drive() -> None:
            try:
                drive_sync(
                    make(), no_invoke, clock, None, perform=perform, here=here, timings=timings
                )
            except BaseException:
                log.exception("late work failed")

        _threads.start(drive, name="approval_guard-withdraw")

    return spawn
