"""The ntfy channel: what each moment queues, and publishing one item to ntfy.

At a request's creation each reviewer the tool's rule lets decide, linked to
a topic, gets one item (``ntfy.publish``) for their own topic; when the
request ends (decided, expired, cancelled) each gets a short notice
(``ntfy.ended``), since ntfy cannot edit the first. An item's text and its
buttons' tokens are made when it is sent, from the request as it is then (so
no token is ever stored), and nothing goes once the request has ended, the
reviewer was removed, or their topic changed. ntfy's answers: ``2xx`` sent;
``429``, ``5xx`` or no answer retried (after its ``Retry-After``); ``401`` /
``403`` (a bad or missing access token) and any other ``4xx`` permanent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx
from starlette.concurrency import run_in_threadpool

from approval_guard._call.backoff import parse_retry_after
from approval_guard._codec.display import escape
from approval_guard.provider.channels.base import (
    CANCELLED,
    CREATED,
    DECIDED,
    EXPIRED,
    Channel,
    Item,
    Moment,
    NewItem,
    Permanent,
    Retry,
    Route,
    SendResult,
    Sent,
    Skipped,
)
from approval_guard.provider.channels.ntfy import message
from approval_guard.provider.channels.ntfy.settings import NAME, NtfySettings
from approval_guard.provider.channels.ntfy.tokens import (
    APPROVE,
    DENY,
    action_url,
    shown_topic,
    sign,
)
from approval_guard.provider.http.render import listed_request_json
from approval_guard.provider.rules.grant_words import decided_through
from approval_guard.provider.store.protocol import StoreProtocol

logger = logging.getLogger("approval_guard.provider.ntfy")

#: A new request's message with its two buttons, for one reviewer.
PUBLISH = "ntfy.publish"
#: The notice once a request has ended.
ENDED = "ntfy.ended"
#: The most of ntfy's error answer a reason quotes.
_MAX_ERROR = 200


class NtfyChannel(Channel):
    """A configured ntfy channel: ``--ntfy-url``, the token, the links' base URL."""

    name = NAME
    links = NAME
    # A topic's new-request message goes before its ended notice.
    per_target = 1
    #: Every topic is on one ntfy server: a slow one never holds every outbox slot.
    at_once = 4
    audit_sent = "ntfy.sent"
    audit_given_up = "ntfy.given_up"
    audit_skipped = "ntfy.skipped"

    def __init__(self, settings: NtfySettings) -> None:
        self.settings = settings
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"NtfyChannel(url={self.settings.url!r})"

    def audit_detail(self, item: Item, attempts: int, result: str) -> dict[str, Any]:
        """The item's audit row: the topic shown only in part (every reviewer reads it)."""
        return {
            "item": item.id,
            "event": item.event_type,
            "target": shown_topic(item.target),
            "attempts": attempts,
            "result": result,
        }

    # ---------------------------------------------------------------- queueing

    def queue(self, moment: Moment) -> Sequence[NewItem]:
        """One item per linked reviewer allowed to decide: at creation, and when it ends."""
        if moment.kind == CREATED:
            if not moment.request.is_pending:
                return ()  # decided at its create (a grant, a rule): nothing to ask
            event = PUBLISH
        elif moment.kind in (DECIDED, EXPIRED, CANCELLED):
            if _decided_at_create(moment):
                return ()  # nobody was asked, so nobody is told
            event = ENDED
        else:
            return ()
        payload: dict[str, Any] = {"kind": moment.kind}
        if moment.decided_by is not None:
            payload["decided_by"] = moment.decided_by
        return [
            NewItem(target=one.identity, event_type=event, payload=payload, reviewer_id=one.id)
            for one in moment.deciders()
            if one.identity is not None
        ]

    # ---------------------------------------------------------------- sending

    def _why_not(self, item: Item, store: StoreProtocol) -> str | None:
        """Why this item must not go now (the request ended, the reviewer gone), or None."""
        if item.reviewer_id is None:
            return "it names no reviewer"
        reviewer = store.reviewer_by_identity(NAME, item.target)
        if reviewer is None or reviewer.id != item.reviewer_id:
            return "the reviewer was removed or their topic changed"
        request = store.get_request(item.request_id)
        if request is None:
            return "the request is gone"
        if item.event_type == PUBLISH and not request.is_pending:
            return f"the request is already {request.status}"
        return None

    def _body(
        self, item: Item, store: StoreProtocol
    ) -> tuple[dict[str, Any] | str, datetime | None]:
        """Blocking: ``(the JSON to publish, or why nothing is sent; no retry after)``."""
        why = self._why_not(item, store)
        if why is not None:
            return why, None
        request = store.get_request(item.request_id)
        assert request is not None and item.reviewer_id is not None
        if item.event_type == ENDED:
            by = item.payload.get("decided_by")
            said = by if isinstance(by, str) else None
            return message.ended(topic=item.target, request=request, decided_by=said), None
        reviewer = store.credential(item.reviewer_id)
        base = self.settings.public_url
        if reviewer is None or base is None:
            why = "no public URL for the buttons" if base is None else "the reviewer was removed"
            return why, None
        secret = store.link_secret()
        urls = {
            action: action_url(
                base,
                request.id,
                sign(
                    secret,
                    item_id=item.id,
                    request_id=request.id,
                    reviewer_id=reviewer.id,
                    topic=item.target,
                    action=action,
                    expires_at=request.deadline_at,
                ),
            )
            for action in (APPROVE, DENY)
        }
        display = listed_request_json(request)["display"]
        body = message.publish(
            topic=item.target,
            request=request,
            display=display,
            reviewer=reviewer.name,
            approve_url=urls[APPROVE],
            deny_url=urls[DENY],
            click=f"{base}/?request={request.id}",
        )
        # Its buttons are worth sending until the request's deadline only.
        return body, request.deadline_at

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                trust_env=False, follow_redirects=False, timeout=self.deadline
            )
        return self._client

    def _scrub(self, text: str) -> str:
        """``text`` (ntfy's answer, an error) with the token never in it."""
        token = self.settings.token
        return text.replace(token, "[token]") if token else text

    async def send(self, item: Item, store: StoreProtocol) -> SendResult:
        """Publish one item as JSON to the server's root; ntfy's answer settles it."""
        if item.event_type not in (PUBLISH, ENDED):
            return Permanent(f"not an ntfy item: {escape(item.event_type)[:80]}")
        body, until = await run_in_threadpool(self._body, item, store)
        if isinstance(body, str):
            return Skipped(body)
        headers = {"Content-Type": "application/json", "User-Agent": "approval-guard"}
        if self.settings.token is not None:
            headers["Authorization"] = f"Bearer {self.settings.token}"
        try:
            answer = await self._http().post(
                self.settings.publish_url, content=message.encoded(body), headers=headers
            )
        except httpx.HTTPError as exc:
            reason = f"ntfy could not be reached: {type(exc).__name__}"
            return Retry(reason, until=until)
        return self._settle(answer, store, until)

    def _settle(
        self, answer: httpx.Response, store: StoreProtocol, until: datetime | None
    ) -> SendResult:
        status = answer.status_code
        if 200 <= status < 300:
            return Sent(f"published (HTTP {status})", status)
        said = self._scrub(_error_text(answer))
        if status == 429 or status >= 500:
            after = parse_retry_after(answer.headers.get("retry-after"), None, store.now())
            return Retry(f"ntfy answered HTTP {status}{said}", after, status, until)
        if status in (401, 403):
            return Permanent(
                f"ntfy refused the access token (HTTP {status}{said}): check "
                "APPROVAL_GUARD_NTFY_TOKEN and the topic's access",
                status,
            )
        return Permanent(f"ntfy refused the message (HTTP {status}{said})", status)

    def routes(self) -> Sequence[Route]:
        """``POST /ntfy/requests/{request_id}/decision?token=``: a button, tapped."""
        from approval_guard.provider.channels.ntfy.actions import ROUTES

        return ROUTES

    async def close(self) -> None:
        """Close the HTTP client :meth:`send` opened."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _decided_at_create(moment: Moment) -> bool:
    """Whether a standing grant or a rules-file rule decided it as it was made."""
    request = moment.request
    return decided_through(request, moment.rules.for_tool(request.tool)) is not None


def _error_text(answer: httpx.Response) -> str:
    """``": <ntfy's error>"`` from its JSON error answer, escaped and short, or ``""``."""
    try:
        found = answer.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return f": {escape(found)[:_MAX_ERROR]}" if isinstance(found, str) and found else ""
