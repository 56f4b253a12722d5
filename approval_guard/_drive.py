"""The two drivers that perform a call's operations: one blocking, one on an event loop.

:func:`drive_sync` and :func:`drive_async` are the only code that turns the
rules' operations (:mod:`._ops`) into I/O, sleeps and the tool's own call, so
sync and async tools obey one copy of the rules. Both take their time from
the injected :class:`~approval_guard.Clock`.

A driver reports abandonment by throwing :class:`~._ops.Abandoned` into the
generator at an abandonable operation (a create, a poll or a backoff sleep);
``KeyboardInterrupt`` and ``asyncio.CancelledError`` are thrown in the same
way and re-raised after the cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from . import _threads
from ._client import TransportError
from ._clock import Clock, sleep_async
from ._ops import Abandoned, Blocking, CallGen, Invoke, Outcome, Sleep, Timings

_DEFAULT_TIMINGS = Timings()


def _wait_abandonable(
    fn: Callable[[], Any],
    abandon: threading.Event | None,
    limit: float | None,
    clock: Clock,
    interval: float,
) -> Any:
    """Run ``fn`` in a helper thread; the caller waits and can give up without killing it.

    A blocking read cannot be interrupted from another thread (psf/requests#5633),
    and a provider that drips its answer never trips a per-read timeout, so the
    waiting thread never blocks in one: it waits on an event that the helper
    sets, looks at ``abandon`` every ``interval`` seconds, and stops at ``limit``
    (by ``clock``).
    """
    outcome = _threads.start(fn, name="approval_guard-poll")
    end = None if limit is None else clock.monotonic() + limit
    while True:
        left = None if end is None else end - clock.monotonic()
        if left is not None and left <= 0:
            raise TransportError("timeout", "no complete answer in time")
        slice_ = left
        if abandon is not None:
            slice_ = interval if left is None else min(interval, left)
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
    timings: Timings | None = None,
) -> Outcome:
    """Perform a call's operations in the calling thread (polls in a helper thread)."""
    interval = (timings or _DEFAULT_TIMINGS).abandon_check_interval
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
                    # Even with no abandon event to watch: a Ctrl-C must be able to
                    # stop the wait while the exchange goes on and withdraws what it
                    # made (an orphaned create's late answer).
                    watch = abandon if may_abandon and op.abandonable else None
                    to_send = _wait_abandonable(op.fn, watch, op.limit, clock, interval)
                else:
                    to_send = op.fn()
            elif isinstance(op, Sleep):
                watch = abandon if may_abandon and op.abandonable else None
                if clock.sleep(op.seconds, watch):
                    to_throw = Abandoned()
            elif isinstance(op, Invoke):
                to_send = invoke(op)
        except BaseException as exc:
            to_throw = exc


async def _await_thread(fn: Callable[[], Any], limit: float | None, clock: Clock) -> Any:
    """Run blocking ``fn`` in its own thread and await it without blocking the loop.

    Not the default executor: it has a handful of workers, and hundreds of
    calls may be waiting on long polls at once. Past ``limit`` seconds (by
    ``clock``) it stops waiting and raises ``TransportError("timeout")``.
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
        return outcome.result()
    end = clock.monotonic() + limit
    while True:
        left = end - clock.monotonic()
        if left <= 0:
            future.cancel()
            raise TransportError("timeout", "no complete answer in time")
        done, _ = await asyncio.wait({future}, timeout=left)
        if done:
            return outcome.result()


async def _await_abandonable(
    awaitable: Any, abandon: threading.Event | None, interval: float
) -> Any:
    task = asyncio.ensure_future(awaitable)
    if abandon is None:
        return await task
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                return task.result()
            if abandon.is_set():
                raise Abandoned()
    finally:
        if not task.done():
            task.cancel()


async def drive_async(
    gen: CallGen,
    invoke: Callable[[Invoke], Any],
    clock: Clock,
    abandon: threading.Event | None,
    *,
    timings: Timings | None = None,
) -> Outcome:
    """Perform a call's operations on the running event loop, never blocking it.

    Task cancellation is abandonment: the request is cancelled at the provider
    and ``CancelledError`` propagates. Sleeps use the clock's ``sleep_async``
    when it has one (see :class:`~._clock.AsyncClock`).
    """
    interval = (timings or _DEFAULT_TIMINGS).abandon_check_interval
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
                work = _await_thread(op.fn, op.limit, clock)
                if op.abandonable and may_abandon:
                    to_send = await _await_abandonable(work, watch, interval)
                elif may_abandon:
                    running = asyncio.ensure_future(work)
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
                    to_send = await asyncio.shield(work)
            elif isinstance(op, Sleep):
                watch = abandon if may_abandon and op.abandonable else None
                await _await_abandonable(sleep_async(clock, op.seconds), watch, interval)
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
