"""What the two drivers share: how an exchange is performed, tracked, and timed out.

The drivers, :func:`~.sync_drive.drive_sync` and :func:`~.async_drive.drive_async`,
are the only code that turns the rules' operations (:mod:`approval_guard._call.ops`)
into I/O, sleeps and the tool's own call, so sync and async tools obey one copy
of the rules. Each performs an :class:`~approval_guard._call.ops.Exchange` with
its own transport: the sync driver with ``requests``, on the calling thread or
in a helper thread it can stop waiting for, the async driver with ``httpx`` on
the event loop itself (no thread). Both take their time from the injected
:class:`~approval_guard.Clock`.

A driver reports abandonment by throwing :class:`~approval_guard._call.ops.Abandoned` into the
generator at an abandonable operation (a create, a poll or a backoff sleep);
``KeyboardInterrupt`` and ``asyncio.CancelledError`` are thrown in the same
way and re-raised after the cancel.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from approval_guard._call.ops import CallGen, Exchange, Invoke, Timings
from approval_guard._transport.answer import Answer, TransportError
from approval_guard._transport.exchange import ExchangeSpec

log = logging.getLogger("approval_guard")

DEFAULT_TIMINGS = Timings()
#: Performs one exchange: the sync transport's ``perform``, or the async one's.
Perform = Callable[[ExchangeSpec], Answer]
APerform = Callable[[ExchangeSpec], Awaitable[Answer]]
#: How to perform an exchange on the calling thread, its whole deadline kept there,
#: or None when the transport cannot keep it so (the sync client's ``here``).
Here = Callable[[ExchangeSpec], Perform | None]


def timed_out() -> TransportError:
    return TransportError("timeout", "no complete answer in time")


def tracked(op: Exchange, perform: Perform) -> Callable[[], Answer]:
    """``perform(op.spec)``, telling the op's tracker how it ended."""
    tracker = op.tracker
    if tracker is None:
        return lambda: perform(op.spec)

    def run() -> Answer:
        answer: Answer | None = None
        try:
            answer = perform(op.spec)
            return answer
        finally:
            tracker.end(answer)

    return run


#: Late work: makes the generator to drive (made again if a first driver is cut short).
Late = Callable[[], CallGen]


def no_invoke(op: Invoke) -> Any:
    """The tool's call for late work, which never starts the tool."""
    raise AssertionError("late work never starts the tool")
