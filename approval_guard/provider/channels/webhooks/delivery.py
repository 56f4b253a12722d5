"""Delivering the webhook outbox: a background task that posts, signs, retries and gives up.

One :class:`Deliverer` runs on the server's event loop while it serves. It
claims due outbox rows (a lease, so several instances on one database never
post the same row at once), posts each with ``httpx.AsyncClient`` (10 s
timeout; redirects are not followed), and settles it: a 2xx is delivered;
anything else is retried with capped exponential backoff and jitter (by
default 5 s doubling to at most 30 min) until 24 hours after the event, then
given up. Store work runs in the thread pool, so the loop never waits on the
database, and the HTTP handlers only ever insert rows: a slow or dead target
never delays a request or a decision.

A change committed anywhere (this instance or, through ``LISTEN``, another)
wakes the task at once; otherwise it sleeps until the next retry is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from datetime import timedelta

import anyio
import httpx
from starlette.concurrency import run_in_threadpool

from approval_guard._codec.wire import epoch_second
from approval_guard.provider.channels.webhooks.in_flight import finish_in_flight
from approval_guard.provider.channels.webhooks.payloads import render_body
from approval_guard.provider.channels.webhooks.settings import WebhookSettings
from approval_guard.provider.channels.webhooks.signing import display_url, sign
from approval_guard.provider.store.models import StoreClosedError
from approval_guard.provider.store.protocol import StoreProtocol
from approval_guard.provider.store.sql.audit import SYSTEM
from approval_guard.provider.store.sql.outbox import (
    DELIVERED,
    GIVEN_UP,
    PENDING_DELIVERY,
    OutboxItem,
)

logger = logging.getLogger("approval_guard.provider")

#: Seconds one delivery may take, connect to last byte.
SEND_TIMEOUT = 10.0
#: How long a claimed row is ours; longer than a send, so it never runs out mid-send.
LEASE_SECONDS = 30.0
#: Rows posted at once.
CONCURRENCY = 16
#: The longest the task sleeps without looking (another instance's retries come due).
IDLE_SECONDS = 5.0
#: The shortest rest after finding nothing to claim.
MIN_REST = 0.02


def _error_text(exc: BaseException, url: str) -> str:
    """What an attempt's failure was, without the URL (whose path or query may be a secret)."""
    text = str(exc).replace(url, display_url(url)).strip()
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class Deliverer:
    """The outbox's delivery task for one serving run."""

    def __init__(
        self,
        store: StoreProtocol,
        settings: WebhookSettings,
        *,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.owner = f"{secrets.token_hex(8)}"
        self._targets = {target.url: target for target in settings.targets}
        self._client = client
        self._inflight: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None

    async def run(self) -> None:
        """Deliver until cancelled; then give back the leases of rows not settled."""
        loop = asyncio.get_running_loop()
        wake = self._wake = asyncio.Event()

        def changed(seq: int, ids: tuple[str, ...]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(wake.set)

        unsubscribe = self.store.subscribe(changed)
        own_client = self._client is None
        client = self._client or httpx.AsyncClient(
            timeout=SEND_TIMEOUT, follow_redirects=False, trust_env=False
        )
        try:
            await self._loop(client, wake)
        finally:
            unsubscribe()
            await finish_in_flight(list(self._inflight))
            if own_client:
                with contextlib.suppress(Exception):
                    await client.aclose()
            with contextlib.suppress(Exception):
                # Shielded: the task is being cancelled, but the leases must go back.
                await asyncio.shield(
                    run_in_threadpool(self.store.release_webhooks, owner=self.owner)
                )

    async def _loop(self, client: httpx.AsyncClient, wake: asyncio.Event) -> None:
        urls = list(self._targets)
        while True:
            wake.clear()
            room = CONCURRENCY - len(self._inflight)
            if room <= 0:
                # Every slot is busy: a finished delivery wakes us.
                with anyio.move_on_after(IDLE_SECONDS):
                    await wake.wait()
                continue
            try:
                items = await run_in_threadpool(
                    self.store.claim_webhooks,
                    owner=self.owner,
                    urls=urls,
                    limit=room,
                    lease=LEASE_SECONDS,
                )
                due = None
                if not items:
                    due = await run_in_threadpool(self.store.next_webhook_due, urls=urls)
            except StoreClosedError:
                return
            except Exception:
                logger.exception("reading the webhook outbox failed")
                items, due = [], None
            for item in items:
                task = asyncio.create_task(
                    self._deliver(client, item), name="approval-guard-webhook"
                )
                self._inflight.add(task)
                task.add_done_callback(self._done)
            if items:
                continue
            timeout = IDLE_SECONDS
            if due is not None:
                # At least a moment: a due row another instance is claiming right now
                # (skipped as locked) must not make this a busy loop.
                left = (due - self.store.now()).total_seconds()
                timeout = min(timeout, max(MIN_REST, left + 0.001))
            with anyio.move_on_after(timeout):
                await wake.wait()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        if self._wake is not None:
            self._wake.set()  # room for another row

    async def _deliver(self, client: httpx.AsyncClient, item: OutboxItem) -> None:
        target = self._targets[item.target_url]
        now = self.store.now()
        approvers = None
        if self.settings.approvers is not None:
            with contextlib.suppress(Exception):
                approvers = self.settings.approvers(item.event)
        body = render_body(
            item.event,
            format=item.format,
            public_url=self.settings.public_url,
            now=now,
            approvers=approvers,
        )
        timestamp = epoch_second(now)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "approval-guard-webhooks",
            "webhook-id": item.id,
            "webhook-timestamp": str(timestamp),
        }
        if target.secret is not None:
            headers["webhook-signature"] = sign(target.secret, item.id, timestamp, body)
        status: int | None = None
        error: str | None = None
        try:
            response = await client.post(target.url, content=body, headers=headers)
            status = response.status_code
        except httpx.HTTPError as exc:
            error = _error_text(exc, target.url)
        attempt = item.attempts + 1
        at = self.store.now()
        if status is not None and 200 <= status < 300:
            state, next_at = DELIVERED, None
        else:
            next_at = at + timedelta(seconds=self.settings.backoff.delay(attempt))
            end = item.created_at + timedelta(seconds=self.settings.backoff.give_up_after)
            state = GIVEN_UP if next_at > end else PENDING_DELIVERY
            if state == GIVEN_UP:
                next_at = None
        try:
            kept = await run_in_threadpool(
                self.store.settle_webhook,
                item.id,
                owner=self.owner,
                attempt=attempt,
                at=at,
                status_code=status,
                error=error,
                state=state,
                next_attempt_at=next_at,
            )
        except StoreClosedError:
            return
        result = f"HTTP {status}" if status is not None else error
        if not kept:
            logger.warning("webhook %s: the lease ran out before it was settled", item.id)
            return
        shown = display_url(target.url)
        if state == DELIVERED:
            logger.debug("webhook %s (%s) delivered to %s", item.id, item.event_type, shown)
        elif state == GIVEN_UP:
            logger.warning(
                "webhook %s (%s) to %s given up after %d attempts (last: %s)",
                item.id,
                item.event_type,
                shown,
                attempt,
                result,
            )
        else:
            logger.info("webhook %s to %s failed (%s); retrying", item.id, shown, result)
        if state != PENDING_DELIVERY:
            await self._audit(item, state, attempt, result, shown)

    async def _audit(
        self, item: OutboxItem, state: str, attempts: int, result: str | None, url: str
    ) -> None:
        record = getattr(self.store, "record_audit", None)
        if record is None:
            return
        detail = {
            "webhook_id": item.id,
            "event": item.event_type,
            "url": url,
            "attempts": attempts,
            "result": result,
        }
        action = "webhook.delivered" if state == DELIVERED else "webhook.given_up"
        try:
            await run_in_threadpool(record, action, SYSTEM, "webhook", item.request_id, detail)
        except Exception:
            logger.exception("recording webhook %s in the audit trail failed", item.id)
