"""Async waits on the store: long polls and the change feed, woken by commits on any thread.

A waiting poll costs one :class:`asyncio.Event`, not a thread. The store calls
:meth:`Notifier.changed` after each commit (from whichever thread made it, or,
on PostgreSQL, the thread that heard another instance's ``NOTIFY``); that hops
onto the event loop and sets the events of the requests it names. A poll
registers *before* it reads, so a decision committed between its read and its
wait still wakes it. Reads run in the thread pool, never on the loop; a request
settled on another PostgreSQL instance comes read already, with its wake-up
(``store.expecting``), so that poll answers without a read of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive

from approval_guard._codec.wire import PENDING
from approval_guard.provider.http.store_calls import StoreCall
from approval_guard.provider.store.models import Credential, StoredRequest
from approval_guard.provider.store.protocol import StoreProtocol


class ManyWatch:
    """One batched wait's wake-up (API 1.2): an event, and which of its ids changed meanwhile."""

    __slots__ = ("event", "everything", "fired")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.fired: set[str] = set()
        #: Set when "anything may have changed" was heard: every id must be read again.
        self.everything = False

    def take(self) -> tuple[set[str], bool]:
        """The ids heard of since the last take (and whether it was everything); clears them."""
        fired, everything = self.fired, self.everything
        self.fired, self.everything = set(), False
        self.event.clear()
        return fired, everything


class Notifier:
    """Per-request and "anything changed" events for one event loop."""

    def __init__(self, store: StoreProtocol, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        # Made on the loop's thread (the app's lifespan): a commit there needs no wake-up.
        self._loop_thread = threading.get_ident()
        self._by_id: dict[str, set[asyncio.Event]] = {}
        self._any: set[asyncio.Event] = set()
        self._many: dict[str, set[ManyWatch]] = {}
        self._draining = False
        self._count = 0
        self._count_cond = threading.Condition()
        self._unsubscribe = store.subscribe(self.changed)

    def close(self) -> None:
        """Stop hearing from the store."""
        self._unsubscribe()

    @property
    def draining(self) -> bool:
        """True once :meth:`drain` was called: every wait answers what it has."""
        return self._draining

    def changed(self, seq: int, request_ids: tuple[str, ...]) -> None:
        """The store's commit callback; safe from any thread. ``()`` wakes every poll."""
        if threading.get_ident() == self._loop_thread:
            # Committed on the loop itself (store calls run at once): no self-pipe wake-up.
            self._loop.call_soon(self._fire, request_ids)
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            self._loop.call_soon_threadsafe(self._fire, request_ids)

    def _fire(self, request_ids: tuple[str, ...]) -> None:
        if request_ids:
            for request_id in request_ids:
                for event in self._by_id.get(request_id, ()):
                    event.set()
                for watch in self._many.get(request_id, ()):
                    watch.fired.add(request_id)
                    watch.event.set()
        else:
            for events in self._by_id.values():
                for event in events:
                    event.set()
            for watches in self._many.values():
                for watch in watches:
                    watch.everything = True
                    watch.event.set()
        for event in self._any:
            event.set()

    def poke(self) -> None:
        """From any thread: wake every change-feed wait to look again (a new notice)."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._fire, ("",))

    def drain(self) -> None:
        """On the loop: end every wait now, each answering the current state."""
        self._draining = True
        self._fire(())

    @contextlib.contextmanager
    def watch(self, request_id: str) -> Iterator[asyncio.Event]:
        """An event set when ``request_id`` changes, counted as a waiting poll."""
        event = asyncio.Event()
        self._by_id.setdefault(request_id, set()).add(event)
        self._counted(+1)
        try:
            yield event
        finally:
            self._counted(-1)
            events = self._by_id.get(request_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._by_id[request_id]

    @contextlib.contextmanager
    def watch_many(self, request_ids: list[str]) -> Iterator[ManyWatch]:
        """One wake-up for all of ``request_ids`` (distinct), each counted as a waiting poll."""
        watch = ManyWatch()
        for request_id in request_ids:
            self._many.setdefault(request_id, set()).add(watch)
        self._counted(+len(request_ids))
        try:
            yield watch
        finally:
            self._counted(-len(request_ids))
            for request_id in request_ids:
                watches = self._many.get(request_id)
                if watches is not None:
                    watches.discard(watch)
                    if not watches:
                        del self._many[request_id]

    @contextlib.contextmanager
    def watch_any(self) -> Iterator[asyncio.Event]:
        """An event set when anything changes (the review page's change feed)."""
        event = asyncio.Event()
        self._any.add(event)
        try:
            yield event
        finally:
            self._any.discard(event)

    def _counted(self, delta: int) -> None:
        with self._count_cond:
            self._count += delta
            self._count_cond.notify_all()

    @property
    def waiting_polls(self) -> int:
        """How many long polls are waiting right now."""
        with self._count_cond:
            return self._count

    def wait_for_waiting_polls(self, n: int, timeout: float) -> bool:
        """From another thread: block until at least ``n`` polls wait; False on timeout."""
        with self._count_cond:
            return self._count_cond.wait_for(lambda: self._count >= n, timeout)


async def long_poll(
    store: StoreProtocol,
    notifier: Notifier,
    request_id: str,
    viewer: Credential,
    wait: float,
    receive: Receive | None = None,
    *,
    calls: StoreCall = run_in_threadpool,
) -> StoredRequest | None:
    """The request once it is not pending, or after ``wait`` seconds; None if not the viewer's.

    ``calls`` runs the store's reads (the context's :class:`StoreCalls`, or a
    worker thread each).

    The store counts an instance credential's poll in the audit trail. A wait
    also ends at the request's deadline (the next read writes its expiry) and
    when the server drains for a graceful stop.
    """
    if wait <= 0:
        return await calls(store.poll, request_id, viewer=viewer, wait=0.0)
    owner = None if viewer.is_reviewer else viewer.id
    gone = asyncio.Event()
    with (
        store.expecting(request_id, owner_id=owner) as settled,
        notifier.watch(request_id) as event,
    ):
        # A client that hangs up ends its wait at once: nobody holds a dead poll for a minute.
        watcher = None if receive is None else asyncio.ensure_future(hung_up(receive, gone, event))
        try:
            request = await calls(store.poll, request_id, viewer=viewer, wait=0.0)
            end = anyio.current_time() + wait
            while request is not None and request.status == PENDING and not notifier.draining:
                remaining = end - anyio.current_time()
                if remaining <= 0 or gone.is_set():
                    break
                to_deadline = (request.deadline_at - store.now()).total_seconds()
                # A millisecond past the deadline, so the next read sees it expired.
                with anyio.move_on_after(min(remaining, max(0.0, to_deadline) + 0.001)):
                    await event.wait()
                event.clear()
                if gone.is_set():
                    break
                # Settled by another instance and read ahead by the thread that heard
                # it: no read of our own (and no hop to a worker thread and back).
                request = settled() or await calls(store.get_request, request_id, owner_id=owner)
        finally:
            if watcher is not None:
                watcher.cancel()
    return request


async def hung_up(receive: Receive, gone: asyncio.Event, wake: asyncio.Event) -> None:
    """Set ``gone`` (and wake the poll) once the client disconnects."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()
    wake.set()


async def wait_for_change(
    store: StoreProtocol,
    notifier: Notifier,
    after: int,
    wait: float,
    *,
    until: Callable[[], bool] = lambda: False,
) -> int:
    """The change sequence once it exceeds ``after`` (or ``until()``), or after ``wait`` s."""
    with notifier.watch_any() as event:
        end = anyio.current_time() + wait
        while True:
            seq = store.seq
            remaining = end - anyio.current_time()
            if seq > after or remaining <= 0 or notifier.draining or until():
                return seq
            with anyio.move_on_after(remaining):
                await event.wait()
            event.clear()
