"""The change feed: who is told, in this process, that requests changed.

A store tells its :class:`ChangeFeed` after every commit that creates, decides,
cancels or expires requests (for PostgreSQL also when another instance did);
the feed then wakes the polls waiting on those requests, the change-waiters
(``wait_for_change``) and every subscriber. It holds no database state: the
sequence number it keeps is the last one it was told about.

A poll registers *before* it reads the state, so a decision committed between
the read and the wait still wakes it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

logger = logging.getLogger("approval_guard.provider")

#: A subscriber: ``callback(seq, request_ids)``; empty ids mean "anything may have changed".
Subscriber = Callable[[int, tuple[str, ...]], None]
#: Who waits on a request here: ``(request id, owner id or None for a reviewer)``.
Expected = tuple[str, "str | None"]


def _nothing() -> None:
    return None


#: What a poll expects from a feed that is never told settled states (SQLite's).
_NOT_READ_AHEAD = contextlib.nullcontext(_nothing)


class ChangeFeed:
    """Per-request wake-ups for long polls, the change sequence, and subscribers."""

    def __init__(self, seq: int = 0, *, reads_ahead: bool = False) -> None:
        self._cond = threading.Condition()
        self._events: dict[str, threading.Event] = {}
        self._refs: dict[str, int] = {}
        self._count = 0
        self._change = threading.Condition()
        self._seq = seq
        # Bumped by wake_all(), so change-waiters return when the server stops.
        self._generation = 0
        self._subscribers: dict[int, Subscriber] = {}
        self._next_token = 0
        self._sub_lock = threading.Lock()
        # Polls expecting a request to settle, and settled states read ahead for them
        # (only where a listener reads ahead: PostgreSQL's).
        self._reads_ahead = reads_ahead
        self._expected: dict[Expected, int] = {}
        self._settled: dict[Expected, Any] = {}

    # ------------------------------------------------------------------ polls

    def register(self, request_id: str) -> threading.Event:
        """An event set at the next change of this request (or by :meth:`wake_all`)."""
        with self._cond:
            event = self._events.get(request_id)
            if event is None:
                event = self._events[request_id] = threading.Event()
                self._refs[request_id] = 0
            self._refs[request_id] += 1
            self._count += 1
            self._cond.notify_all()
            return event

    def unregister(self, request_id: str, event: threading.Event) -> None:
        """Forget one registration made by :meth:`register`."""
        with self._cond:
            self._count -= 1
            if self._events.get(request_id) is event:
                self._refs[request_id] -= 1
                if self._refs[request_id] == 0:
                    del self._events[request_id]
                    del self._refs[request_id]
            self._cond.notify_all()

    @property
    def waiting(self) -> int:
        """How many polls are registered right now."""
        with self._cond:
            return self._count

    def wait_for_waiting(self, n: int, timeout: float) -> bool:
        """Block until at least ``n`` polls are registered; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._count >= n, timeout)

    def _fire(self, request_ids: tuple[str, ...]) -> None:
        with self._cond:
            if request_ids:
                events = [self._events.pop(key, None) for key in request_ids]
                for key in request_ids:
                    self._refs.pop(key, None)
            else:
                events = list(self._events.values())
                self._events.clear()
                self._refs.clear()
        for event in events:
            if event is not None:
                event.set()

    def expecting(
        self, request_id: str, owner_id: str | None
    ) -> contextlib.AbstractContextManager[Callable[[], Any]]:
        """While a poll waits: the request's settled state if one was read ahead for it.

        The callable returns (once) the state that the thread hearing another
        instance's change read for this request and viewer (``owner_id``; None
        for a reviewer), or None: nothing heard yet, or it is still pending.
        A poll given None reads the request itself, as it always did. A feed
        made without ``reads_ahead`` registers nothing and always gives None.
        """
        if not self._reads_ahead:
            return _NOT_READ_AHEAD
        return self._expecting((request_id, owner_id))

    @contextlib.contextmanager
    def _expecting(self, key: Expected) -> Iterator[Callable[[], Any]]:
        with self._cond:
            self._expected[key] = self._expected.get(key, 0) + 1

        def take() -> Any:
            with self._cond:
                return self._settled.pop(key, None)

        try:
            yield take
        finally:
            with self._cond:
                left = self._expected[key] - 1
                if left:
                    self._expected[key] = left
                else:
                    del self._expected[key]
                    self._settled.pop(key, None)

    def expected(self, request_ids: tuple[str, ...]) -> list[Expected]:
        """Which of ``request_ids`` polls here expect to settle, and for which viewers."""
        with self._cond:
            if not self._expected:
                return []
            wanted = set(request_ids)
            return [key for key in self._expected if key[0] in wanted]

    # ------------------------------------------------------------------ changes

    def changed(
        self, seq: int, request_ids: tuple[str, ...], settled: Mapping[Expected, Any] | None = None
    ) -> None:
        """After a commit: these requests changed, and the sequence reached ``seq``.

        Empty ``request_ids`` means "anything may have changed" (a notification
        too large to list them, or one that may have been missed): every poll
        wakes and re-reads. ``settled``: states read after the commit for the
        polls :meth:`expecting` them (only decided, cancelled or expired ones:
        they never change again), kept for those polls to take when they wake.
        """
        if settled:
            with self._cond:
                for key, state in settled.items():
                    if key in self._expected:
                        self._settled[key] = state
        self._fire(request_ids)
        with self._change:
            self._seq = max(self._seq, seq)
            self._change.notify_all()
        with self._sub_lock:
            subscribers = list(self._subscribers.values())
        for callback in subscribers:
            try:
                callback(seq, request_ids)
            except Exception:
                logger.exception("a change subscriber raised; ignored")

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(seq, request_ids)`` after every change; returns the unsubscribe."""
        with self._sub_lock:
            token = self._next_token
            self._next_token += 1
            self._subscribers[token] = callback

        def unsubscribe() -> None:
            with self._sub_lock:
                self._subscribers.pop(token, None)

        return unsubscribe

    @property
    def seq(self) -> int:
        """The last change sequence this feed was told about."""
        with self._change:
            return self._seq

    def wait_for_change(
        self, *, after: int, timeout: float, should_stop: Callable[[], bool] | None = None
    ) -> int:
        """Block until the sequence exceeds ``after``, ``wake_all``, ``should_stop()`` or timeout.

        ``should_stop`` is checked under the lock :meth:`wake_all` notifies
        with, so a stop flag set before ``wake_all()`` is never missed.
        """
        with self._change:
            generation = self._generation
            self._change.wait_for(
                lambda: (
                    self._seq > after
                    or self._generation != generation
                    or (should_stop is not None and should_stop())
                ),
                max(0.0, timeout),
            )
            return self._seq

    def wake_all(self) -> None:
        """End every waiting poll and change-wait now (used when the server stops)."""
        self._fire(())
        with self._change:
            self._generation += 1
            self._change.notify_all()
