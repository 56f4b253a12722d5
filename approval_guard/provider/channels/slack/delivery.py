"""Delivering the Slack rows of the outbox: post each request's message, then keep it current.

A background task on the server's loop, beside the webhook deliverer and on
the same outbox: it leases the rows whose target is ``slack:<channel>``
(several instances on one database never hold the same row), and works them
one at a time, oldest first, so a request's post comes before its updates. A
``slack.post`` row calls ``chat.postMessage`` and keeps the answer's
``channel`` and ``ts``; a ``slack.update`` row calls ``chat.update`` on that
message. Both render the request as it is *now* (``blocks.message``), so a
late or repeated update never shows an older state.

A failure is retried with the webhooks' backoff until 24 hours after the
change; Slack's ``429`` is retried after its ``Retry-After`` seconds, and the
task asks Slack nothing meanwhile. An error that no retry can mend (the
message is gone, or Slack refuses its blocks) gives the row up at once; an
error in the app's setup (a bad token, a channel the bot is not in) is retried,
since the operator may fix it, and logged as an error naming the fix. An
update whose post has not happened yet waits for it. Nothing here runs inside
a request or a decision: a Slack outage only delays the messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import anyio
from starlette.concurrency import run_in_threadpool

from approval_guard._codec.wire import CANCELLED
from approval_guard.provider.channels.slack.blocks import MAX_BATCH_SHOWN, message
from approval_guard.provider.channels.slack.client import Answer, call, make_client
from approval_guard.provider.channels.slack.settings import SlackSettings, rule_channels
from approval_guard.provider.channels.webhooks.in_flight import finish_in_flight
from approval_guard.provider.channels.webhooks.settings import Backoff
from approval_guard.provider.store.models import StoreClosedError
from approval_guard.provider.store.protocol import StoreProtocol
from approval_guard.provider.store.sql.audit import SYSTEM
from approval_guard.provider.store.sql.outbox import (
    DELIVERED,
    GIVEN_UP,
    PENDING_DELIVERY,
    OutboxItem,
)
from approval_guard.provider.store.sql.slack import POST, TARGET_PREFIX

if TYPE_CHECKING:
    from slack_sdk import WebClient

logger = logging.getLogger("approval_guard.provider")

#: Rows leased at once (worked one after the other).
BATCH = 10
#: How long a leased row is ours: longer than a batch of calls.
LEASE_SECONDS = 120.0
#: The longest the task sleeps without looking (another instance's retries come due).
IDLE_SECONDS = 5.0
#: A row whose request has not been posted yet is looked at again this soon.
WAIT_FOR_POST = 1.0
#: Slack errors no retry can mend: the row is given up at once.
PERMANENT = frozenset(
    {
        "cant_update_message",
        "edit_window_closed",
        "invalid_blocks",
        "invalid_blocks_format",
        "message_not_found",
        "msg_too_long",
        "no_text",
        "too_many_attachments",
    }
)
#: Slack errors in the app's setup, with what the operator should do about them.
SETUP = {
    "account_inactive": "the bot token's account is deactivated: install the app again",
    "channel_not_found": "no such channel for this app: check --slack-channel (or the rule's)",
    "invalid_auth": "Slack refuses the bot token: check --slack-bot-token",
    "is_archived": "the channel is archived: unarchive it or choose another",
    "missing_scope": "the app lacks a scope: add chat:write and reinstall it",
    "not_authed": "no bot token reached Slack: check --slack-bot-token",
    "not_in_channel": "the bot is not in the channel: invite it (/invite @app)",
    "restricted_action": "the workspace does not let the bot post there",
    "token_revoked": "the bot token was revoked: install the app again",
}


def slack_targets(settings: SlackSettings) -> list[str]:
    """The outbox targets of every channel the server may post to."""
    channels = set(rule_channels(settings.rules))
    if settings.channel:
        channels.add(settings.channel)
    return sorted(TARGET_PREFIX + channel for channel in channels)


class SlackDeliverer:
    """The Slack outbox task for one serving run."""

    def __init__(
        self,
        store: StoreProtocol,
        settings: SlackSettings,
        *,
        backoff: Backoff | None = None,
        public_url: str | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.backoff = backoff or Backoff()
        self.public_url = public_url
        self.owner = "slack-" + secrets.token_hex(8)
        self._urls = slack_targets(settings)
        self._client: WebClient | None = None
        #: Slack said 429: ask nothing before this.
        self._paused_until: datetime | None = None
        #: The row being delivered, as a task a stop lets finish (``finish_in_flight``).
        self._inflight: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Deliver until cancelled; then give back the leases of rows not settled."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def changed(seq: int, ids: tuple[str, ...]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(wake.set)

        unsubscribe = self.store.subscribe(changed)
        try:
            await self._loop(wake)
        finally:
            unsubscribe()
            await finish_in_flight(list(self._inflight))
            with contextlib.suppress(Exception):
                await asyncio.shield(
                    run_in_threadpool(self.store.release_webhooks, owner=self.owner)
                )

    async def _loop(self, wake: asyncio.Event) -> None:
        while True:
            wake.clear()
            paused = self._paused_until
            if paused is not None:
                rest = (paused - self.store.now()).total_seconds()
                if rest > 0:
                    await anyio.sleep(min(rest, IDLE_SECONDS))
                    continue
                self._paused_until = None
            try:
                items = await run_in_threadpool(
                    self.store.claim_webhooks,
                    owner=self.owner,
                    urls=self._urls,
                    limit=BATCH,
                    lease=LEASE_SECONDS,
                )
                due = None
                if not items:
                    due = await run_in_threadpool(self.store.next_webhook_due, urls=self._urls)
            except StoreClosedError:
                return
            except Exception:
                logger.exception("reading the Slack outbox failed")
                items, due = [], None
            for item in items:
                if self._paused_until is not None:
                    # Rate limited: the rest go back, due again once the pause ends.
                    await run_in_threadpool(self.store.release_webhooks, owner=self.owner)
                    break
                # A task of its own, shielded: a stop lets its call and record finish.
                delivery = asyncio.ensure_future(self._deliver(item))
                self._inflight.add(delivery)
                delivery.add_done_callback(self._inflight.discard)
                try:
                    await asyncio.shield(delivery)
                except StoreClosedError:
                    return
                except Exception:
                    logger.exception("delivering Slack row %s failed", item.id)
            if items:
                continue
            timeout = IDLE_SECONDS
            if due is not None:
                left = (due - self.store.now()).total_seconds()
                timeout = min(timeout, max(0.02, left + 0.001))
            with anyio.move_on_after(timeout):
                await wake.wait()

    def _send(self, item: OutboxItem) -> Answer:
        """One row's Web API call (in the thread pool)."""
        request = self.store.get_request(item.request_id)
        if request is None:
            return Answer(ok=False, status=None, error="the request is gone")
        cancel_reason = None
        if request.status == CANCELLED:
            note = self.store.annotations([request.id]).get(request.id)
            cancel_reason = None if note is None else note.cancel_reason
        batch = None
        if request.batch is not None and request.is_pending:
            # One more than shown: the message says when some are left out.
            batch = self.store.pending_in_batch(request.id, limit=MAX_BATCH_SHOWN + 1)
        body = message(
            request,
            rule=self.settings.rules.for_tool(request.tool),
            now=self.store.now(),
            public_url=self.public_url,
            cancel_reason=cancel_reason,
            batch=batch,
        )
        if self._client is None:
            self._client = make_client(self.settings)
        posted = self.store.slack_message(request.id)
        if posted is None and item.event_type == POST:
            channel = item.target_url[len(TARGET_PREFIX) :]
            answer = call(
                self._client,
                "chat.postMessage",
                channel=channel,
                text=body["text"],
                blocks=body["blocks"],
                unfurl_links=False,
                unfurl_media=False,
            )
            at_channel, ts = answer.data.get("channel"), answer.data.get("ts")
            if answer.ok and isinstance(at_channel, str) and isinstance(ts, str):
                self.store.save_slack_message(request.id, at_channel, ts)
            elif answer.ok:
                return Answer(
                    ok=False, status=answer.status, error="no channel and ts in the answer"
                )
            return answer
        if posted is None:
            return Answer(ok=False, status=None, error="not posted yet")
        return call(
            self._client,
            "chat.update",
            channel=posted[0],
            ts=posted[1],
            text=body["text"],
            blocks=body["blocks"],
        )

    async def _deliver(self, item: OutboxItem) -> None:
        answer = await run_in_threadpool(self._send, item)
        attempt = item.attempts + 1
        at = self.store.now()
        end = item.created_at + timedelta(seconds=self.backoff.give_up_after)
        next_at: datetime | None = None
        if answer.ok:
            state = DELIVERED
        elif answer.error == "the request is gone" or answer.error in PERMANENT:
            state = GIVEN_UP
        else:
            if answer.status == 429:
                wait = answer.retry_after if answer.retry_after is not None else 30.0
                self._paused_until = at + timedelta(seconds=wait)
            elif answer.error == "not posted yet":
                wait = WAIT_FOR_POST
            else:
                wait = self.backoff.delay(attempt)
            next_at = at + timedelta(seconds=wait)
            state = GIVEN_UP if next_at > end else PENDING_DELIVERY
            if state == GIVEN_UP:
                next_at = None
        kept = await run_in_threadpool(
            self.store.settle_webhook,
            item.id,
            owner=self.owner,
            attempt=attempt,
            at=at,
            status_code=answer.status,
            error=None if answer.ok else f"slack: {answer.error}",
            state=state,
            next_attempt_at=next_at,
        )
        if not kept:
            logger.warning("Slack row %s: the lease ran out before it was settled", item.id)
            return
        fix = SETUP.get(answer.error or "")
        if fix is not None and state == PENDING_DELIVERY:
            logger.error(
                "Slack %s for %s refused (%s): %s; retrying",
                item.event_type,
                item.request_id,
                answer.error,
                fix,
            )
        elif state == PENDING_DELIVERY:
            logger.info(
                "Slack %s for %s failed (%s); retrying",
                item.event_type,
                item.request_id,
                answer.error,
            )
        elif state == GIVEN_UP:
            logger.warning(
                "Slack %s for %s given up after %d attempts (last: %s)",
                item.event_type,
                item.request_id,
                attempt,
                answer.error,
            )
            with contextlib.suppress(Exception):
                await run_in_threadpool(
                    self.store.record_audit,
                    "slack.given_up",
                    SYSTEM,
                    "slack",
                    item.request_id,
                    {"event": item.event_type, "attempts": attempt, "result": answer.error},
                )
