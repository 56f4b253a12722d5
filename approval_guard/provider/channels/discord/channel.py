"""The Discord channel: one message per request in one channel, following it until it ends.

At a request's creation the outbox posts its message (Approve / Deny…
buttons) to the configured channel and the store keeps the message's id;
each later moment (an approval counted, decided, expired, cancelled) edits
that message to the request as it is then, without buttons once it is not
pending. A request's items share one target sent one at a time, so its post
goes before its edits; an edit whose post has not happened yet waits for it.
A post that finds its message already kept (sent before a crash, settled
after it) edits instead, so a request has one message; a post Discord made
after its send's deadline ran out is found again by its ``nonce`` (Discord's
``enforce_nonce``: the same nonce within a few minutes returns that message).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from starlette.concurrency import run_in_threadpool

from approval_guard.provider.channels.base import (
    CREATED,
    MOMENTS,
    PENDING_DELIVERY,
    Channel,
    ChannelSettingsError,
    Item,
    Moment,
    NewItem,
    Permanent,
    Retry,
    Route,
    SendResult,
    Sent,
)
from approval_guard.provider.channels.discord.api import DiscordApi, result
from approval_guard.provider.channels.discord.interactions import PATH, Interactions
from approval_guard.provider.channels.discord.message import message
from approval_guard.provider.channels.discord.settings import (
    NAME,
    DiscordSettings,
    check_snowflake,
)
from approval_guard.provider.channels.discord.verify import load_key

if TYPE_CHECKING:
    from approval_guard.provider.store.protocol import StoreProtocol

#: The outbox rows' ``event_type`` s: the request's message posted, then edited.
POST, EDIT = "discord.post", "discord.edit"
#: An edit before its post waits until the post is due, and this tenth of it more (at most
#: :data:`MAX_POST_WAIT`).
POST_WAIT = 1.0
MAX_POST_WAIT = 300.0


def post_nonce(request_id: str) -> str:
    """The request's post's ``nonce`` (Discord takes at most 25 characters): retries share it."""
    return "ag" + hashlib.sha256(request_id.encode("utf-8")).hexdigest()[:23]


class DiscordChannel(Channel):
    """A configured Discord channel (see the module's docstring).

    :param settings: the application, its channel and the API URL.
    :param public_url: the provider's public URL (each message links the review page), or None.
    """

    name: ClassVar[str] = NAME
    deadline: float = 10.0
    per_target: ClassVar[int] = 1
    #: Every message goes through one API: a slow one never holds every outbox slot.
    at_once: ClassVar[int | None] = 4
    audit_given_up: ClassVar[str | None] = "discord.given_up"

    def __init__(self, settings: DiscordSettings, *, public_url: str | None = None) -> None:
        try:
            key = load_key(settings.public_key)
        except ValueError as exc:
            raise ChannelSettingsError(str(exc)) from None
        self.settings = settings
        self.public_url = public_url
        self._api = DiscordApi(settings, timeout=self.deadline)
        self._interactions = Interactions(key, public_url=public_url)

    def __repr__(self) -> str:
        return f"DiscordChannel(channel={self.settings.channel!r})"

    def queue(self, moment: Moment) -> Sequence[NewItem]:
        """The post at creation; an edit at every later moment of the request's life."""
        if moment.kind not in MOMENTS:
            return ()
        request = moment.request
        rule = moment.rules.for_tool(request.tool)
        payload: dict[str, Any] = {"approvers": list(rule.approvers) if rule.approvers else None}
        return [
            NewItem(
                # One target per request: its post before its edits, other requests not held up.
                target=f"discord:{self.settings.channel}:{request.id}",
                event_type=POST if moment.kind == CREATED else EDIT,
                payload=payload,
            )
        ]

    async def send(self, item: Item, store: StoreProtocol) -> SendResult:
        """Post the request's message, or edit it to the request as it is now."""
        request = await run_in_threadpool(store.get_request, item.request_id)
        if request is None:
            return Permanent("the request is no longer in the store")
        approvers = item.payload.get("approvers")
        body = message(
            request,
            now=store.now(),
            approvers=[str(one) for one in approvers] if isinstance(approvers, list) else None,
            public_url=self.public_url,
        )
        channel = self.settings.channel
        posted = await run_in_threadpool(store.channel_message, NAME, request.id)
        if posted is None and item.event_type == POST:
            once = {"nonce": post_nonce(request.id), "enforce_nonce": True}
            answer = await self._api.create_message(channel, {**body, **once})
            if not answer.ok:
                return result(answer, what="posting the message")
            found = answer.data.get("id")
            message_id = str(found) if isinstance(found, (str, int)) else None
            try:
                check_snowflake(message_id, "a Discord message id")
            except ValueError:
                # Posted, but unknown: posting again would show the request twice.
                return Permanent("Discord's answer named no message id", status=answer.status)
            await run_in_threadpool(store.keep_channel_message, NAME, request.id, str(message_id))
            return Sent(f"message {message_id}", status=answer.status)
        if posted is None:
            return await run_in_threadpool(self._post_state, item, store)
        answer = await self._api.edit_message(channel, posted, body)
        if not answer.ok:
            return result(answer, what="editing the message")
        return Sent(f"message {posted} edited", status=answer.status)

    def _post_state(self, item: Item, store: StoreProtocol) -> SendResult:
        """An edit without its message: wait until its post is due, or end if it never will be."""
        rows = store.list_outbox(channels=[NAME], request_id=item.request_id)
        posts = [one for one in rows if one.event_type == POST and one.state == PENDING_DELIVERY]
        if not posts:
            if store.channel_message(NAME, item.request_id) is not None:
                return Retry("the message was just posted", after=0.0)
            return Permanent("the request's message was never posted (its post was given up)")
        due = min((one.next_attempt_at for one in posts if one.next_attempt_at), default=None)
        wait = 0.0 if due is None else (due - store.now()).total_seconds()
        return Retry(
            "the request's message is not posted yet",
            after=min(max(wait, 0.0) + POST_WAIT / 10, MAX_POST_WAIT),
        )

    def routes(self) -> Sequence[Route]:
        """``POST /discord/interactions``."""
        return [(PATH, {"POST": self._interactions})]

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._api.close()
