"""Store work from the event loop: on the loop when nothing must wait, else in a worker thread.

A handler awaits ``ctx.calls(fn, *args)`` where it would await
``run_in_threadpool(fn, *args)``. Calls made in one turn of the loop are
queued together; right after that turn they run on the loop in one
transaction when the store can do that without waiting (the SQLite store's
``run_at_once``: its writer lock free, no other process writing), and each
handler is given its call's outcome once that transaction has committed, so
nothing is answered before it is kept. When the store would have to wait, or
cannot run calls at once (PostgreSQL, ``":memory:"``), each call goes to a
worker thread exactly as before. A handler cancelled before its turn leaves
its call unrun.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from starlette.concurrency import run_in_threadpool

from approval_guard.provider.store.at_once import Outcome

T = TypeVar("T")

#: Most calls one turn runs (the store's group-commit limit); the rest wait a turn.
PER_TURN = 64
#: Seconds of calls one turn may start: the loop serves everyone else in between.
TURN_SECONDS = 0.01


class StoreCall(Protocol):
    """Runs a blocking store call for a coroutine: :class:`StoreCalls`, or ``run_in_threadpool``."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...


class RunAtOnce(Protocol):
    """A store's ``run_at_once``."""

    def __call__(
        self, calls: list[Callable[[], Any]], *, until: float | None = None
    ) -> list[Outcome[Any]] | None: ...


class StoreCalls:
    """One event loop's way of running store calls (see the module's docstring)."""

    def __init__(self, store: object, loop: asyncio.AbstractEventLoop) -> None:
        self._run_at_once: RunAtOnce | None = getattr(store, "run_at_once", None)
        self._loop = loop
        self._queue: list[tuple[Callable[[], Any], asyncio.Future[Outcome[Any] | None]]] = []
        self._scheduled = False

    async def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        call = functools.partial(fn, *args, **kwargs) if args or kwargs else fn
        if self._run_at_once is None:
            return await run_in_threadpool(call)
        future: asyncio.Future[Outcome[Any] | None] = self._loop.create_future()
        self._queue.append((call, future))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._turn)
        outcome = await future
        if outcome is None:
            # The store would have waited (its writer busy): a worker thread waits instead.
            return await run_in_threadpool(call)
        result: T = outcome.unwrap()
        return result

    def _turn(self) -> None:
        """Run the calls queued so far (at most :data:`PER_TURN`), then answer each."""
        self._scheduled = False
        queued = [(call, future) for call, future in self._queue if not future.done()]
        taken, self._queue = queued[:PER_TURN], queued[PER_TURN:]
        if self._queue:
            self._scheduled = True
            self._loop.call_soon(self._turn)
        if not taken:
            return
        assert self._run_at_once is not None
        try:
            outcomes = self._run_at_once(
                [call for call, _ in taken], until=time.monotonic() + TURN_SECONDS
            )
        except BaseException as exc:
            # The store refused to begin (closed, say), or an interrupt: each call is told.
            for _, future in taken:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if outcomes is None:
            for _, future in taken:
                if not future.done():
                    future.set_result(None)
            return
        for (_, future), outcome in zip(taken, outcomes, strict=False):
            if not future.done():
                future.set_result(outcome)
        if len(outcomes) < len(taken):
            # Out of time: the calls not started go first in the next turn.
            self._queue[:0] = taken[len(outcomes) :]
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._turn)
