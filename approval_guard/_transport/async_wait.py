"""Batched waits (API 1.2): one event loop's waiting async calls multiplexed onto a few requests.

Over HTTP/1.1 a long poll holds a connection (and httpx's request, response and
connection state) for as long as it waits. Where the provider serves
``POST /v1/requests/wait``, the long polls of one loop's calls are instead
carried by a few batched waits (at most :data:`MAX_BATCHES` in flight, each
listing at most :data:`MAX_IDS` ids): a call's poll waits on a future here,
and what a batch answers about its request becomes that poll's answer, read
by the call exactly as a ``GET`` answer is (the same strict parsing, echo and
expiry checks). A call whose wait ends with no news is told so
(``Answer.unchanged``) and polls again, as after a pending answer.

A new id never waits for a batch to come back: it goes into a new batch, or,
with :data:`MAX_BATCHES` in flight, the smallest one is cut short and sent
again with it (gathered for :data:`MERGE_DELAY` first, so a stream of new
calls does not cut a batch per call). On any doubt the poll is the plain
``GET`` it would have been: a batch that fails, answers with an error or
with a body that is not the documented shape, an item that does not parse or
comes twice, an id reported not found (the ``GET`` gives the real answer), or
more calls than the batches can hold. A provider that does not know the path
(``404``, ``405``, ``400``, ``501``) is not asked again by this client. A
provider answering at once with nothing, again and again, is asked again only
after a growing pause: no busy loop.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable

from approval_guard._codec.clock import Clock, ClockSample
from approval_guard._transport.answer import Answer
from approval_guard._transport.batch_answer import (
    BATCH_WAIT,
    EARLY,
    LINGER,
    MAX_BATCHES,
    MAX_ID,
    MAX_IDS,
    MAX_IDS_BYTES,
    MERGE_DELAY,
    PAUSE_FIRST,
    PAUSE_LAST,
    READ_SLACK,
    STRIKES,
    SWEEP,
    UNSUPPORTED,
    fitting,
    read_batch,
)
from approval_guard._transport.exchange import ExchangeSpec, LongPoll, read, wait_many

__all__ = [
    "BATCH_WAIT",
    "EARLY",
    "LINGER",
    "MAX_BATCHES",
    "MAX_ID",
    "MAX_IDS",
    "MAX_IDS_BYTES",
    "MERGE_DELAY",
    "PAUSE_FIRST",
    "PAUSE_LAST",
    "READ_SLACK",
    "STRIKES",
    "SWEEP",
    "UNSUPPORTED",
    "BatchSupport",
    "BatchedWaits",
]

log = logging.getLogger("approval_guard")


class BatchSupport:
    """Whether the provider serves batched waits: believed until it says otherwise, for good."""

    def __init__(self) -> None:
        self.ok = True


class _Fallback:
    """Settles a poll that must be the plain ``GET``."""


class _Unchanged:
    """Settles a poll whose wait ended with no news."""


#: What a batch's answer said: it failed, it had news, it had nothing.
_FAILED, _NEWS, _NOTHING = "failed", "news", "nothing"
FALLBACK = _Fallback()
UNCHANGED = _Unchanged()
_Result = Answer | _Fallback | _Unchanged


class _Interest:
    """One request id's place here: the poll waiting on it, the batch listing it, news kept."""

    __slots__ = ("batch", "future", "held", "left_at")

    def __init__(self) -> None:
        self.future: asyncio.Future[_Result] | None = None
        self.batch: _Batch | None = None
        self.held: Answer | None = None
        self.left_at = 0.0


class _Batch:
    """One batched wait in flight: the ids it lists and the task carrying it."""

    __slots__ = ("ids", "task")

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.task: asyncio.Task[None] | None = None


def _settle(future: asyncio.Future[_Result], result: _Result) -> None:
    if not future.done():
        future.set_result(result)


class BatchedWaits:
    """One loop's batched waits for one client (see the module's docstring)."""

    def __init__(
        self,
        send: Callable[[ExchangeSpec], Awaitable[Answer]],
        *,
        clock: Clock,
        support: BatchSupport,
    ) -> None:
        """``send`` performs one exchange (one attempt, an Answer or TransportError)."""
        self._send = send
        self._clock = clock
        self._support = support
        self._interests: dict[str, _Interest] = {}
        self._unsent: dict[str, None] = {}
        self._batches: set[_Batch] = set()
        self._flush_at: asyncio.Handle | None = None
        self._pause = 0.0
        self._closed = False
        self._swept = clock.monotonic()
        self._strikes = 0
        self._sweep_at: asyncio.TimerHandle | None = None

    @property
    def batches(self) -> int:
        """Batched waits in flight now."""
        return len(self._batches)

    async def poll(self, spec: LongPoll) -> Answer:
        """The answer to ``spec`` (a long poll), carried by a batch when it can be."""
        started = self._clock.monotonic()
        rid = spec.request_id
        if not self._support.ok or self._closed or spec.wait <= 0 or not 1 <= len(rid) <= MAX_ID:
            return await self._send(spec)
        interest = self._interests.get(rid)
        if interest is not None and interest.future is not None:
            return await self._send(spec)  # another call polls it already: poll alone
        if interest is None:
            interest = self._interests[rid] = _Interest()
        if interest.held is not None:
            held, interest.held = interest.held, None
            if interest.batch is None:
                del self._interests[rid]
            return held
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Result] = loop.create_future()
        interest.future = future
        if interest.batch is None:
            self._unsent[rid] = None
            self._schedule()
        timer = loop.call_later(spec.wait, _settle, future, UNCHANGED)
        try:
            result = await future
        finally:
            timer.cancel()
            if interest.future is future:
                interest.future = None
                interest.left_at = self._clock.monotonic()
                if interest.batch is None and interest.held is None:
                    self._interests.pop(rid, None)  # nothing carries it: nothing to keep
        if isinstance(result, Answer):
            return result
        now = self._clock.monotonic()
        if isinstance(result, _Unchanged):
            return Answer(200, None, None, ClockSample(started, now, None), unchanged=True)
        # The plain GET, with what is left of this poll's wait and deadline.
        spent = now - started
        wait = max(0, math.floor(spec.wait - spent))
        return await self._send(read(rid, wait=wait, timeout=max(0.05, spec.timeout - spent)))

    # -- sending batches --------------------------------------------------------------

    def _schedule(self) -> None:
        if self._flush_at is not None:
            return
        loop = asyncio.get_running_loop()
        if len(self._batches) < MAX_BATCHES and not self._pause:
            self._flush_at = loop.call_soon(self._flush)
        else:
            self._flush_at = loop.call_later(max(MERGE_DELAY, self._pause), self._flush)

    def _wanted(self, rid: str, now: float) -> bool:
        """A poll waits on ``rid``, or its call is between two polls (and has no news yet)."""
        interest = self._interests.get(rid)
        if interest is None:
            return False
        if interest.future is not None:
            return not interest.future.done()
        if now - interest.left_at > LINGER:
            del self._interests[rid]  # its call has moved on
            return False
        return interest.held is None

    def _live(self, rid: str) -> bool:
        """A poll waits on ``rid`` right now."""
        interest = self._interests.get(rid)
        return interest is not None and interest.future is not None and not interest.future.done()

    def _sweep(self, now: float) -> None:
        """Forget news nobody came back for (a call cancelled between two polls)."""
        self._swept = now
        for rid in [
            rid
            for rid, one in self._interests.items()
            if one.future is None and one.batch is None and now - one.left_at > LINGER
        ]:
            del self._interests[rid]

    def _flush(self) -> None:
        self._flush_at = None
        if self._clock.monotonic() - self._swept > SWEEP:
            self._sweep(self._clock.monotonic())
        fresh = [rid for rid in self._unsent if self._live(rid)]
        self._unsent.clear()
        if self._closed or not self._support.ok:
            for rid in fresh:
                self._fall_back(rid)
            return
        now = self._clock.monotonic()
        while fresh:
            if len(self._batches) < MAX_BATCHES:
                taken = max(1, fitting([], fresh))
                self._start(fresh[:taken])
                fresh = fresh[taken:]
                continue
            smallest = min(self._batches, key=lambda b: len(b.ids))
            kept = [rid for rid in smallest.ids if self._wanted(rid, now)]
            room = fitting(kept, fresh)
            if room <= 0:
                for rid in fresh:  # every batch is full: these poll alone
                    self._fall_back(rid)
                return
            self._cut_short(smallest)
            self._start(kept + fresh[:room])
            fresh = fresh[room:]

    def _start(self, ids: list[str]) -> None:
        batch = _Batch(list(dict.fromkeys(ids)))
        for rid in batch.ids:
            self._interests[rid].batch = batch
        self._batches.add(batch)
        batch.task = asyncio.ensure_future(self._carry(batch))

    def _cut_short(self, batch: _Batch) -> None:
        self._batches.discard(batch)
        self._release(batch)
        if batch.task is not None:
            batch.task.cancel()

    def _release(self, batch: _Batch) -> None:
        for rid in batch.ids:
            interest = self._interests.get(rid)
            if interest is not None and interest.batch is batch:
                interest.batch = None

    def _fall_back(self, rid: str) -> None:
        interest = self._interests.get(rid)
        if interest is not None and interest.future is not None:
            _settle(interest.future, FALLBACK)

    # -- one batch's answer -----------------------------------------------------------

    async def _carry(self, batch: _Batch) -> None:
        spec = wait_many(batch.ids, wait=BATCH_WAIT, timeout=BATCH_WAIT + READ_SLACK)
        sent = self._clock.monotonic()
        answer: Answer | None = None
        try:
            answer = await asyncio.wait_for(self._send(spec), spec.timeout)
        except asyncio.CancelledError:
            if batch not in self._batches:
                return  # cut short: its ids are in another batch already
            raise
        except Exception as exc:
            log.debug("a batched wait failed (%s); its calls poll alone this time", exc)
        if batch not in self._batches:
            return
        self._batches.discard(batch)
        self._release(batch)
        try:
            moved, said = self._read(batch, answer)
        except Exception:  # nothing a provider sends may break a waiting call
            log.warning("a batched wait's answer could not be read", exc_info=True)
            moved, said = self._give_up(batch.ids), _FAILED
        quick = self._clock.monotonic() - sent < EARLY
        struck = said == _FAILED or (said == _NOTHING and quick)
        self._strikes = self._strikes + 1 if struck else 0
        if self._strikes >= STRIKES and self._support.ok:
            log.warning(
                "%d batched waits in a row failed or answered at once with nothing; "
                "this client polls each call alone from now on",
                self._strikes,
            )
            self._support.ok = False
            for rid in list(self._interests):
                self._fall_back(rid)
        self._pause = (
            0.0 if moved or not quick else min(PAUSE_LAST, max(PAUSE_FIRST, 2 * self._pause))
        )
        for rid in batch.ids:
            interest = self._interests.get(rid)
            if interest is not None and interest.batch is None and self._live(rid):
                self._unsent[rid] = None
            elif interest is not None and interest.future is None and interest.held is None:
                del self._interests[rid]  # its call is not polling: it registers again if it does
            elif interest is not None and interest.held is not None:
                self._arm_sweep()
        if self._unsent:
            self._schedule()

    def _arm_sweep(self) -> None:
        """Forget held news once nobody can come back for it, even if no batch runs again."""
        if self._sweep_at is None and not self._closed:
            self._sweep_at = asyncio.get_running_loop().call_later(LINGER + 0.5, self._timed_sweep)

    def _timed_sweep(self) -> None:
        self._sweep_at = None
        self._sweep(self._clock.monotonic())
        if any(one.held is not None for one in self._interests.values()):
            self._arm_sweep()

    def _give_up(self, ids: list[str]) -> bool:
        for rid in ids:
            self._fall_back(rid)
        return True

    def _read(self, batch: _Batch, answer: Answer | None) -> tuple[bool, str]:
        """Hand each item to its poll: (some poll moved on, what the answer said)."""
        if answer is None:
            return self._give_up(batch.ids), _FAILED
        if not answer.ok:
            if answer.status in UNSUPPORTED and self._support.ok:
                log.info("the provider does not serve batched waits (%s)", answer.describe())
                self._support.ok = False
                for rid in list(self._interests):
                    self._fall_back(rid)
            return self._give_up(batch.ids), _FAILED
        reading = read_batch(batch.ids, answer.body)
        if reading is None:
            return self._give_up(batch.ids), _FAILED
        moved = False
        for rid, item in reading.found.items():
            moved = (
                self._deliver(rid, Answer(200, item, answer.provider_request_id, answer.sample))
                or moved
            )
        for rid in reading.doubtful:
            interest = self._interests.get(rid)
            if interest is not None and interest.future is not None:
                moved = True
                _settle(interest.future, FALLBACK)
        return moved, _NEWS if reading.news else _NOTHING

    def _deliver(self, rid: str, answer: Answer) -> bool:
        interest = self._interests.get(rid)
        if interest is None:
            return False
        if interest.future is not None:
            del self._interests[rid]
            _settle(interest.future, answer)
            return True
        interest.held = answer  # its call is between two polls: the next one gets it
        interest.left_at = self._clock.monotonic()
        return False

    # -- closing -----------------------------------------------------------------------

    def close(self) -> None:
        """Stop every batch; each poll waiting becomes the plain GET."""
        self._closed = True
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        if self._sweep_at is not None:
            self._sweep_at.cancel()
            self._sweep_at = None
        for batch in list(self._batches):
            self._cut_short(batch)
        for rid in list(self._interests):
            self._fall_back(rid)
