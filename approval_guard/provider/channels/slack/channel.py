"""Slack as a channel: each request's message posted, then kept current, from the outbox.

:meth:`SlackChannel.queue` writes, for a tool posted to a Slack channel, a
``slack.post`` item when a request is created and a ``slack.update`` on each
approval, the decision, expiry and cancel (target ``slack:<channel>``; one at
a time per channel, oldest first, so a post comes before its updates). Both
render the request as it is *now* (``blocks.message``), so a late or repeated
update never shows an older state. The message's ``channel`` and ``ts`` are
kept (``channel_message``), so an update after a restart finds it.

Slack's ``429`` is retried after its ``Retry-After``; an error no retry can
mend (a bad token, the message gone, blocks Slack refuses) is permanent at
once; an error in the app's setup an operator may fix (the bot not in the
channel) is retried and logged as an error naming the fix. An update whose
post has not happened yet waits for it (looked at again when the post is due);
one whose post was given up is given up too.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from starlette.concurrency import run_in_threadpool

from approval_guard._codec.wire import CANCELLED
from approval_guard.provider.channels.base import (
    PENDING_DELIVERY,
    Channel,
    Item,
    Moment,
    NewItem,
    Permanent,
    Retry,
    Route,
    SendResult,
    Sent,
)
from approval_guard.provider.channels.slack.blocks import MAX_BATCH_SHOWN, message
from approval_guard.provider.channels.slack.client import CALL_TIMEOUT, Answer, call_async
from approval_guard.provider.channels.slack.settings import SlackSettings
from approval_guard.provider.store.protocol import StoreProtocol

if TYPE_CHECKING:
    import httpx
    from starlette.requests import Request
    from starlette.responses import Response

    from approval_guard.provider.http.context import Context

logger = logging.getLogger("approval_guard.provider")

#: An item's target for a Slack channel, and its body format.
TARGET_PREFIX = "slack:"
SLACK_FORMAT = "slack_app"
POST = "slack.post"
UPDATE = "slack.update"
#: A row whose request has not been posted yet is looked at again this soon (at least).
WAIT_FOR_POST = 1.0
#: An update whose post was given up (or never queued): it is given up too.
NEVER_POSTED = "the request's message was never posted"
#: Slack errors no retry can mend: the item is given up at once.
PERMANENT = {
    "cant_update_message": "the message can no longer be updated",
    "edit_window_closed": "the message can no longer be edited",
    "invalid_blocks": "Slack refuses the message's blocks",
    "invalid_blocks_format": "Slack refuses the message's blocks",
    "message_not_found": "the message is gone",
    "msg_too_long": "the message is too long for Slack",
    "no_text": "the message has no text",
    "too_many_attachments": "the message has too many attachments",
    "invalid_auth": "Slack refuses the bot token: check --slack-bot-token",
    "not_authed": "no bot token reached Slack: check --slack-bot-token",
    "token_revoked": "the bot token was revoked: install the app again",
    "account_inactive": "the bot token's account is deactivated: install the app again",
}
#: Slack errors in the app's setup an operator may fix while it retries, and the fix.
SETUP = {
    "channel_not_found": "no such channel for this app: check --slack-channel (or the rule's)",
    "is_archived": "the channel is archived: unarchive it or choose another",
    "missing_scope": "the app lacks a scope: add chat:write and reinstall it",
    "not_in_channel": "the bot is not in the channel: invite it (/invite @app)",
    "restricted_action": "the workspace does not let the bot post there",
}
_KINDS = ("created", "approval", "decided", "expired", "cancelled")


class SlackChannel(Channel):
    """A Slack app's messages: one per request, kept current."""

    name: ClassVar[str] = "slack"
    #: A Web API call (connect to last byte) and its save fit in this.
    deadline: float = CALL_TIMEOUT + 5.0
    per_target: ClassVar[int] = 1
    audit_given_up: ClassVar[str | None] = "slack.given_up"

    def __init__(
        self,
        settings: SlackSettings,
        *,
        public_url: str | None = None,
        horizon: float = 24 * 3600.0,
    ) -> None:
        self.settings = settings
        self.public_url = public_url
        self.horizon = horizon
        self._http: httpx.AsyncClient | None = None

    def queue(self, moment: Moment) -> Sequence[NewItem]:
        if moment.kind not in _KINDS:
            return ()
        channel = self.settings.channel_for(moment.request.tool)
        if not channel:
            return ()
        event_type = POST if moment.kind == "created" else UPDATE
        payload = {"type": event_type, "kind": moment.kind, "request_id": moment.request.id}
        return [
            NewItem(
                target=TARGET_PREFIX + channel,
                event_type=event_type,
                payload=payload,
                format=SLACK_FORMAT,
            )
        ]

    def audit_detail(self, item: Item, attempts: int, result: str) -> dict[str, Any]:
        return {"event": item.event_type, "attempts": attempts, "result": result}

    def routes(self) -> Sequence[Route]:
        from approval_guard.provider.channels.slack.interactions import interactions

        settings = self.settings

        async def clicked(ctx: Context, request: Request) -> Response:
            return await interactions(ctx, request, settings)

        return [("/slack/interactions", {"POST": clicked})]

    async def send(self, item: Item, store: StoreProtocol) -> SendResult:
        answer = await self._call(item, store)
        if answer.ok:
            return Sent("sent", status=answer.status)
        error = answer.error or "error"
        if error == "the request is gone":
            return Permanent(error)
        if error in PERMANENT:
            return Permanent(f"slack: {error}: {PERMANENT[error]}", status=answer.status)
        if error == NEVER_POSTED:
            return Permanent(error)
        if error == "not posted yet":
            # Looked at again once its post is due (an outage's backoff), not every second.
            return Retry(error, after=max(WAIT_FOR_POST, answer.retry_after or 0.0))
        fix = SETUP.get(error)
        if fix is not None:
            logger.error(
                "Slack %s for %s refused (%s): %s", item.event_type, item.request_id, error, fix
            )
        after = (answer.retry_after or 30.0) if answer.status == 429 else None
        return Retry(f"slack: {error}", after=after, status=answer.status)

    async def close(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    async def _call(self, item: Item, store: StoreProtocol) -> Answer:
        """One item's Web API call: read and render in the thread pool, send on the loop.

        Sent with ``httpx`` on the event loop, so the outbox's deadline cuts it
        (a thread's read could outlive the item's lease).
        """
        found = await run_in_threadpool(self._prepare, item, store)
        if isinstance(found, Answer):
            return found
        method, arguments = found
        if self._http is None:
            import httpx

            # trust_env: HTTP(S)_PROXY is honoured, as slack_sdk's WebClient honours it.
            self._http = httpx.AsyncClient(
                timeout=self.deadline, follow_redirects=False, trust_env=True
            )
        answer = await call_async(self._http, self.settings, method, **arguments)
        if method != "chat.postMessage":
            return answer
        at_channel, ts = answer.data.get("channel"), answer.data.get("ts")
        if answer.ok and isinstance(at_channel, str) and isinstance(ts, str):
            await run_in_threadpool(
                store.keep_channel_message, self.name, item.request_id, f"{at_channel} {ts}"
            )
        elif answer.ok:
            return Answer(ok=False, status=answer.status, error="no channel and ts in the answer")
        return answer

    def _post_state(self, item: Item, store: StoreProtocol) -> Answer:
        """An update without its message: wait for the post (when it is due), or never will."""
        rows = store.list_outbox(channels=[self.name], request_id=item.request_id)
        posts = [one for one in rows if one.event_type == POST and one.state == PENDING_DELIVERY]
        if not posts and store.channel_message(self.name, item.request_id) is None:
            # Given up (a bad token, blocks Slack refuses), or never queued: nothing to update.
            return Answer(ok=False, status=None, error=NEVER_POSTED)
        due = min((one.next_attempt_at for one in posts if one.next_attempt_at), default=None)
        wait = 0.0 if due is None else (due - store.now()).total_seconds()
        return Answer(ok=False, status=None, error="not posted yet", retry_after=wait)

    def _prepare(self, item: Item, store: StoreProtocol) -> Answer | tuple[str, dict[str, Any]]:
        """Blocking: the Web API method and arguments for one item, or the answer without one."""
        request = store.get_request(item.request_id)
        if request is None:
            return Answer(ok=False, status=None, error="the request is gone")
        cancel_reason = None
        if request.status == CANCELLED:
            note = store.annotations([request.id]).get(request.id)
            cancel_reason = None if note is None else note.cancel_reason
        batch = None
        if request.batch is not None and request.is_pending:
            # One more than shown: the message says when some are left out.
            batch = store.pending_in_batch(request.id, limit=MAX_BATCH_SHOWN + 1)
        body = message(
            request,
            rule=self.settings.rules.for_tool(request.tool),
            now=store.now(),
            public_url=self.public_url,
            cancel_reason=cancel_reason,
            batch=batch,
        )
        posted = store.channel_message(self.name, request.id)
        if posted is None and item.event_type == POST:
            return "chat.postMessage", {
                "channel": item.target[len(TARGET_PREFIX) :],
                "text": body["text"],
                "blocks": body["blocks"],
                "unfurl_links": False,
                "unfurl_media": False,
            }
        if posted is None:
            return self._post_state(item, store)
        at_channel, _, ts = posted.partition(" ")
        return "chat.update", {
            "channel": at_channel,
            "ts": ts,
            "text": body["text"],
            "blocks": body["blocks"],
        }
