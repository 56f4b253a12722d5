"""The event-loop driver: performs a call's operations with httpx on the running loop, no thread."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from approval_guard._call.ops import (
    Abandoned,
    Blocking,
    CallGen,
    Exchange,
    Invoke,
    Outcome,
    Sleep,
    Timings,
)
from approval_guard._codec.clock import Clock, sleep_async
from approval_guard._transport import threads as _threads
from approval_guard._transport.answer import Answer
from approval_guard._transport.drive import DEFAULT_TIMINGS, APerform, Perform, timed_out
from approval_guard._transport.exchange import Create, ExchangeSpec

log = logging.getLogger("approval_guard")

#: Creates in flight on one event loop at most: 10,000 calls starting at once would
#: otherwise all wait on the provider together, and most would time out and be sent again.
CREATES = 64
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)

#: The longest a create may wait for its turn to be sent (the harness's limit comes first).
CREATE_QUEUE_LIMIT = 600.0

#: Exchanges left to finish after their call stopped waiting (kept from the GC).
_orphans: set[asyncio.Future[Any]] = set()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Read a finished exchange's exception, so that nobody is warned it went unread."""
    if not task.cancelled():
        task.exception()


def threaded(perform: Perform) -> APerform:
    """The sync transport for async tools when ``httpx`` is missing: each exchange in a thread.

    Without the ``async`` extra, async tools still work, one helper thread per
    exchange in flight (as before version 0.2); the hard deadline is the async
    driver's, and a cancelled wait leaves the thread to end on its own.
    """

    async def run(spec: ExchangeSpec) -> Answer:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not future.done():
                future.set_result(None)

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed while we waited
                loop.call_soon_threadsafe(settle)

        outcome = _threads.start(lambda: perform(spec), name="approval_guard-io", on_done=wake)
        await future
        answer: Answer = outcome.result()
        return answer

    return run


def start_exchange(op: Exchange, perform: APerform, clock: Clock) -> asyncio.Future[Answer]:
    """``op`` as a task on the running loop, ended at its hard deadline however the provider drips.

    The task tells ``op.tracker`` how it ended, even when nobody awaits it any more.
    A create the transport may hold back (``Create.by``) has until then, its own
    timeout counted by the transport from when it is sent.
    """
    limit = op.spec.timeout
    if isinstance(op.spec, Create):
        limit = max(limit, min(op.spec.by - clock.monotonic(), limit + CREATE_QUEUE_LIMIT))

    async def run() -> Answer:
        answer: Answer | None = None
        try:
            try:
                answer = await asyncio.wait_for(_send(op.spec, perform), max(0.0, limit))
            except asyncio.TimeoutError:
                raise timed_out() from None
            return answer
        finally:
            if op.tracker is not None:
                op.tracker.end(answer)

    if op.tracker is not None:
        op.tracker.begin()
    task = asyncio.ensure_future(run())
    task.add_done_callback(_retrieve)
    return task


async def _send(spec: ExchangeSpec, perform: APerform) -> Answer:
    """``perform(spec)``; a create waits for one of its loop's :data:`CREATES` places first."""
    if not isinstance(spec, Create):
        return await perform(spec)
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(CREATES)
    async with gate:
        return await asyncio.wait_for(perform(spec), max(0.0, spec.timeout))


def _orphan(task: asyncio.Future[Any]) -> None:
    """Let ``task`` finish alone: its tracker withdraws whatever it made."""
    _orphans.add(task)
    task.add_done_callback(_orphans.discard)


async def _await_abandonable(
    task: asyncio.Future[Any],
    abandon: threading.Event | None,
    interval: float,
    *,
    keep: bool,
) -> Any:
    """Await ``task``; raise Abandoned when ``abandon`` is set (looked at every ``interval``).

    When this wait ends early (abandoned, or this task cancelled), ``task`` is
    cancelled, or with ``keep`` left to finish alone.
    """
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=None if abandon is None else interval)
            if done:
                return task.result()
            if abandon is not None and abandon.is_set():
                raise Abandoned()
    finally:
        if not task.done():
            if keep:
                _orphan(task)
            else:
                task.cancel()


async def _await_to_the_end(work: asyncio.Future[Any]) -> tuple[Any, asyncio.CancelledError | None]:
    """Await ``work``, which a cancel must not cut short: the cancel is returned, for later."""
    deferred: asyncio.CancelledError | None = None
    while True:
        try:
            return await asyncio.shield(work), deferred
        except asyncio.CancelledError as exc:
            if work.cancelled():
                raise
            deferred = exc


async def drive_async(
    gen: CallGen,
    invoke: Callable[[Invoke], Any],
    clock: Clock,
    abandon: threading.Event | None,
    *,
    perform: APerform,
    timings: Timings | None = None,
) -> Outcome:
    """Perform a call's operations on the running event loop, never blocking it.

    Exchanges are tasks on this loop (no thread); the execution record's short
    writes go to the loop's default executor. Task cancellation is abandonment:
    the request is cancelled at the provider and ``CancelledError`` propagates.
    Sleeps use the clock's ``sleep_async`` when it has one (see
    :class:`~._clock.AsyncClock`).
    """
    interval = (timings or DEFAULT_TIMINGS).abandon_check_interval
    loop = asyncio.get_running_loop()
    to_send: Any = None
    to_throw: BaseException | None = None
    may_abandon = True
    # A task cancel that arrived during an operation that must finish (the
    # record, a cancel, a clock re-read): thrown in at the next operation, where the
    # rules can still give back what they hold. (A create is abandonable: its late
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
            if isinstance(op, Exchange):
                task = start_exchange(op, perform, clock)
                if op.abandonable and may_abandon:
                    watch = abandon if may_abandon else None
                    to_send = await _await_abandonable(
                        task, watch, interval, keep=op.tracker is not None
                    )
                elif may_abandon:
                    to_send, late = await _await_to_the_end(task)
                    deferred = late or deferred
                else:
                    # Cleanup after a cancel: shielded, so a second cancel cannot cut it short.
                    to_send = await asyncio.shield(task)
            elif isinstance(op, Blocking):
                work = loop.run_in_executor(None, op.fn)
                if may_abandon:
                    to_send, late = await _await_to_the_end(work)
                    deferred = late or deferred
                else:
                    to_send = await asyncio.shield(work)
            elif isinstance(op, Sleep):
                watch = abandon if may_abandon and op.abandonable else None
                nap = asyncio.ensure_future(sleep_async(clock, op.seconds))
                await _await_abandonable(nap, watch, interval, keep=False)
            elif isinstance(op, Invoke):
                to_send = invoke(op)
                if asyncio.iscoroutine(to_send):
                    to_send = await to_send
        except GeneratorExit:
            # This coroutine is being closed (never to be resumed): close the rules too.
            gen.close()
            raise
        except BaseException as exc:
            to_throw = exc
