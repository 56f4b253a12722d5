"""Webhooks as a channel: each request event, for each target its tool's events go to, signed.

:meth:`WebhooksChannel.queue` writes one item per (event, target) inside the
change's transaction (its id is the event's ``webhook-id``, the same on every
retry); :meth:`WebhooksChannel.send` posts one with ``httpx`` (redirects not
followed): a 2xx is sent; a 410 (gone) is given up at once; a ``Retry-After`` (429,
503) is honoured; anything else is retried with the outbox's backoff until
the horizon. The outbox bounds
each post by :attr:`deadline`, connect to last byte.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, ClassVar

import httpx

from approval_guard._codec.wire import epoch_second
from approval_guard.provider.channels.base import (
    Channel,
    Item,
    Moment,
    NewItem,
    Permanent,
    Retry,
    SendResult,
    Sent,
)
from approval_guard.provider.channels.webhooks.payloads import EVENT_TYPES, event_json, render_body
from approval_guard.provider.channels.webhooks.settings import WebhookSettings
from approval_guard.provider.channels.webhooks.signing import display_url, new_msg_id, sign
from approval_guard.provider.store.protocol import StoreProtocol

#: A receiver's "gone for good": given up at once, not retried.
GONE = 410
#: The longest ``Retry-After`` honoured (a longer one waits this long).
MAX_RETRY_AFTER = 3600.0


def error_text(exc: BaseException, url: str) -> str:
    """What an attempt's failure was, without the URL (whose path or query may be a secret)."""
    text = str(exc).replace(url, display_url(url)).strip()
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def retry_after(response: httpx.Response) -> float | None:
    """A response's ``Retry-After`` in seconds (0 to an hour), or None."""
    value = response.headers.get("retry-after", "")
    with contextlib.suppress(ValueError):
        seconds = float(value)
        if 0 <= seconds:
            return min(seconds, MAX_RETRY_AFTER)
    return None


class WebhooksChannel(Channel):
    """Every request event posted to each target its tool's events go to."""

    name: ClassVar[str] = "webhooks"
    deadline: float = 10.0
    per_target: ClassVar[int] = 4
    audit_sent: ClassVar[str | None] = "webhook.delivered"
    audit_given_up: ClassVar[str | None] = "webhook.given_up"
    audit_source: ClassVar[str] = "webhook"

    def __init__(self, settings: WebhookSettings, *, client: httpx.AsyncClient | None = None):
        self.settings = settings
        self.horizon = settings.backoff.give_up_after
        self.backoff = settings.backoff
        self._targets = {target.url: target for target in settings.routes.targets}
        self._client = client
        self._own_client = client is None

    def queue(self, moment: Moment) -> Sequence[NewItem]:
        if moment.kind not in EVENT_TYPES:
            return ()
        request = moment.request
        targets = self.settings.routes.for_tool(request.tool)
        if not targets:
            return ()
        event = event_json(moment.kind, moment.at, request, decided_by=moment.decided_by)
        return [
            NewItem(
                target=target.url,
                event_type=event["type"],
                payload=event,
                format=target.format,
                id=new_msg_id(),
            )
            for target in targets
        ]

    def audit_detail(self, item: Item, attempts: int, result: str) -> dict[str, Any]:
        return {
            "webhook_id": item.id,
            "event": item.event_type,
            "url": display_url(item.target),
            "attempts": attempts,
            "result": result,
        }

    async def send(self, item: Item, store: StoreProtocol) -> SendResult:
        target = self._targets.get(item.target)
        if target is None:
            # Its target is not configured now (a restart without it): wait for it, then give up.
            return Retry(f"{display_url(item.target)} is not a configured target")
        now = store.now()
        approvers = None
        if self.settings.approvers is not None:
            with contextlib.suppress(Exception):
                approvers = self.settings.approvers(item.payload)
        body = render_body(
            item.payload,
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
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.deadline, follow_redirects=False, trust_env=False
            )
        try:
            response = await self._client.post(target.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return Retry(error_text(exc, target.url))
        status = response.status_code
        if 200 <= status < 300:
            return Sent(f"HTTP {status}", status=status)
        if status == GONE:
            # Standard Webhooks: the receiver asks not to be sent this again.
            return Permanent(f"HTTP {status}: the receiver is gone", status=status)
        return Retry(f"HTTP {status}", after=retry_after(response), status=status)

    async def close(self) -> None:
        if self._own_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
