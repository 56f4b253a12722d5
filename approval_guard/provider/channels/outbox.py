"""The one outbox worker: claims every channel's due items, sends each within a deadline, settles.

One :class:`OutboxWorker` runs on the server's event loop while it serves. It
claims due rows with a lease (so several instances on one database never send
the same row at once) and gives each to its channel's ``send``, bounded by the
channel's overall :attr:`~approval_guard.provider.channels.base.Channel.deadline`
(connect to last byte: a receiver that drips one byte at a time is cut off at
it), which is always shorter than the lease, so a lease never runs out while
its send is still open and no item is ever sent twice at once. At most
``per_target`` items of one target are in flight, so one slow or dead target
never holds every slot and never delays another target's items.

A channel's answer settles the row: :class:`Sent` is delivered;
:class:`Retry` is tried again after its ``after`` seconds (a receiver's
``Retry-After``, never sooner than the backoff) or the backoff (doubling,
capped, with jitter), until the channel's horizon after the change, then
given up; :class:`Permanent` is given up at once, logged and audited;
:class:`Skipped` is settled as not sent on purpose. A send that raises is
retried like an outage (the exception's type is logged, never its text,
which may hold a URL or a token).

A change committed anywhere (this instance or, through ``LISTEN``, another)
wakes the worker at once; otherwise it sleeps until the next retry is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import timedelta

import anyio
from starlette.concurrency import run_in_threadpool

from approval_guard.provider.channels.base import (
    DELIVERED,
    GIVEN_UP,
    PENDING_DELIVERY,
    SKIPPED,
    Backoff,
    Channel,
    Item,
    Permanent,
    Retry,
    SendResult,
    Sent,
    Skipped,
)
from approval_guard.provider.store.models import StoreClosedError
from approval_guard.provider.store.protocol import StoreProtocol
from approval_guard.provider.store.sql.audit import SYSTEM

logger = logging.getLogger("approval_guard.provider")

#: Items in flight at once, every channel together.
CONCURRENCY = 16
#: The longest the worker sleeps without looking (another instance's retries come due).
IDLE_SECONDS = 5.0
#: The shortest rest after finding nothing to claim.
MIN_REST = 0.02
#: A lease outlasts the longest send by this much (settling it takes a moment too).
LEASE_MARGIN = 20.0
#: How long a stop waits for the sends in flight before it cancels them.
FINISH_SECONDS = 3.0


async def finish_in_flight(
    tasks: Collection[asyncio.Task[None]], *, seconds: float = FINISH_SECONDS
) -> None:
    """Let ``tasks`` end for up to ``seconds``, then cancel the rest and wait for them."""
    running = [task for task in tasks if not task.done()]
    if not running:
        return
    ended, late = await asyncio.wait(running, timeout=seconds)
    for task in ended:
        if not task.cancelled():
            task.exception()  # logged where it was raised; retrieved here
    for task in late:
        task.cancel()
    for task in late:
        with contextlib.suppress(BaseException):
            await task


def lease_for(channels: Sequence[Channel]) -> float:
    """The lease: longer than any channel's send deadline, by :data:`LEASE_MARGIN`."""
    return max([30.0, *(channel.deadline + LEASE_MARGIN for channel in channels)])


class OutboxWorker:
    """The outbox's one delivery task for one serving run, for every configured channel."""

    def __init__(
        self,
        store: StoreProtocol,
        channels: Sequence[Channel],
        *,
        backoff: Backoff | None = None,
        concurrency: int = CONCURRENCY,
    ) -> None:
        self.store = store
        self.channels = {channel.name: channel for channel in channels}
        self.backoff = backoff or Backoff()
        self.concurrency = concurrency
        self.lease = lease_for(channels)
        self.owner = secrets.token_hex(8)
        self._inflight: dict[asyncio.Task[None], tuple[str, str]] = {}
        #: The ids being sent now: one claimed again (a send outliving its lease in a
        #: thread, which no deadline can stop) is not sent a second time meanwhile.
        self._sending: set[str] = set()
        self._wake: asyncio.Event | None = None

    async def run(self) -> None:
        """Deliver until cancelled; then give back the leases of rows not settled."""
        loop = asyncio.get_running_loop()
        wake = self._wake = asyncio.Event()

        def changed(seq: int, ids: tuple[str, ...]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(wake.set)

        unsubscribe = self.store.subscribe(changed)
        try:
            await self._loop(wake)
        finally:
            unsubscribe()
            await finish_in_flight(list(self._inflight))
            for channel in self.channels.values():
                with contextlib.suppress(Exception):
                    await channel.close()
            with contextlib.suppress(Exception):
                # Shielded: the task is being cancelled, but the leases must go back.
                await asyncio.shield(run_in_threadpool(self.store.release_outbox, owner=self.owner))

    async def _loop(self, wake: asyncio.Event) -> None:
        per_target = {name: channel.per_target for name, channel in self.channels.items()}
        while True:
            wake.clear()
            room = self.concurrency - len(self._inflight)
            if room <= 0:
                # Every slot is busy: a finished send wakes us.
                with anyio.move_on_after(IDLE_SECONDS):
                    await wake.wait()
                continue
            busy = Counter(self._inflight.values())
            # A channel at its most at once (one slow server behind every target) is not
            # claimed for; one with a little room left bounds this claim to that room.
            open_by_channel = Counter(name for name, _ in self._inflight.values())
            claimable = dict(per_target)
            limit = room
            for name, channel in self.channels.items():
                if channel.at_once is None:
                    continue
                spare = channel.at_once - open_by_channel[name]
                if spare <= 0:
                    claimable.pop(name, None)
                else:
                    limit = min(limit, spare)
            try:
                items = await run_in_threadpool(
                    functools.partial(
                        self.store.claim_outbox,
                        owner=self.owner,
                        per_target=claimable,
                        busy=busy,
                        limit=limit,
                        lease=self.lease,
                    )
                )
                due = None
                if not items:
                    # A channel at its most is woken by its next send ending, not by a due row.
                    due = await run_in_threadpool(
                        self.store.next_outbox_due, channels=list(claimable)
                    )
            except StoreClosedError:
                return
            except Exception:
                logger.exception("reading the outbox failed")
                items, due = [], None
            for item in items:
                if item.id in self._sending:
                    continue  # still being sent: its send settles it
                self._sending.add(item.id)
                task = asyncio.create_task(
                    self._deliver(item), name=f"approval-guard-{item.channel}"
                )
                self._inflight[task] = (item.channel, item.target)
                task.add_done_callback(functools.partial(self._done, item.id))
            if items:
                continue
            timeout = IDLE_SECONDS
            if due is not None:
                # At least a moment: a due row another instance is claiming right now
                # (skipped as locked), or one whose target is busy, must not spin.
                left = (due - self.store.now()).total_seconds()
                timeout = min(timeout, max(MIN_REST, left + 0.001))
            if self._inflight and busy:
                timeout = min(timeout, 1.0)
            with anyio.move_on_after(timeout):
                await wake.wait()

    def _done(self, item_id: str, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        self._sending.discard(item_id)
        if self._wake is not None:
            self._wake.set()  # room for another row

    async def _send(self, channel: Channel, item: Item) -> SendResult:
        try:
            with anyio.fail_after(channel.deadline):
                return await channel.send(item, self.store)
        except TimeoutError:
            return Retry(f"no complete answer within {channel.deadline:g} s")
        except StoreClosedError:
            raise
        except Exception as exc:
            # The type only: an exception's text may hold a URL's secret part or a token.
            logger.warning(
                "%s item %s: sending raised %s", item.channel, item.id, type(exc).__name__
            )
            return Retry(f"error: {type(exc).__name__}")

    async def _deliver(self, item: Item) -> None:
        channel = self.channels[item.channel]
        try:
            result = await self._send(channel, item)
        except StoreClosedError:
            return
        attempt = item.attempts + 1
        at = self.store.now()
        next_at = None
        status = getattr(result, "status", None)
        if isinstance(result, Sent):
            state, text = DELIVERED, result.detail
        elif isinstance(result, Skipped):
            state, text = SKIPPED, f"not sent: {result.reason}"
        elif isinstance(result, Permanent):
            state, text = GIVEN_UP, result.reason
        else:
            text = result.reason
            backoff = channel.backoff or self.backoff
            wait = backoff.delay(attempt)
            if result.after is not None:
                # A receiver's Retry-After (an answer's status came with it) is a wait at
                # least that long, never shorter than the backoff: "Retry-After: 0" again
                # and again must not make a hot loop. A channel's own wait is as given.
                wait = max(result.after, wait) if result.status is not None else result.after
            next_at = at + timedelta(seconds=max(0.0, wait))
            end = item.created_at + timedelta(seconds=channel.horizon)
            if result.until is not None:
                end = min(end, result.until)
            state = GIVEN_UP if next_at > end else PENDING_DELIVERY
            if state == GIVEN_UP:
                next_at = None
        try:
            kept = await run_in_threadpool(
                lambda: self.store.settle_outbox(
                    item.id,
                    owner=self.owner,
                    attempt=attempt,
                    at=at,
                    status_code=status,
                    error=None if state == DELIVERED else text,
                    state=state,
                    next_attempt_at=next_at,
                    result=text if status is None else None,
                )
            )
        except StoreClosedError:
            return
        if not kept:
            logger.warning(
                "%s item %s: the lease ran out before it was settled", item.channel, item.id
            )
            return
        self._log(item, state, attempt, text, isinstance(result, Permanent))
        action = {
            DELIVERED: channel.audit_sent,
            GIVEN_UP: channel.audit_given_up,
            SKIPPED: channel.audit_skipped,
        }.get(state)
        if action is None:
            return
        result_text = f"HTTP {status}" if status is not None and state == DELIVERED else text
        detail = channel.audit_detail(item, attempt, result_text)
        try:
            await run_in_threadpool(
                self.store.record_audit,
                action,
                SYSTEM,
                channel.audit_source or channel.name,
                item.request_id,
                detail,
            )
        except Exception:
            logger.exception(
                "recording %s item %s in the audit trail failed", item.channel, item.id
            )

    @staticmethod
    def _log(item: Item, state: str, attempt: int, text: str, permanent: bool) -> None:
        where = f"{item.channel} {item.event_type} {item.id} for {item.request_id}"
        if state == DELIVERED:
            logger.debug("%s delivered", where)
        elif state == PENDING_DELIVERY:
            logger.info("%s failed (%s); retrying", where, text)
        elif state == SKIPPED:
            logger.info("%s %s", where, text)
        elif permanent:
            logger.error("%s given up: %s (no retry can mend it)", where, text)
        else:
            logger.warning("%s given up after %d attempts (last: %s)", where, attempt, text)
