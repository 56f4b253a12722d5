"""The buttons' signed tokens: one published message's, bound to its request, reviewer and topic.

A token is the channels' signed link token (:mod:`approval_guard.provider.channels.links`)
with ntfy's own context, so an email link's token decides nothing here nor
this one there: it names the outbox item (its id is the single-use key the Approve
and Deny buttons of one message share), the request, the reviewer's
credential id, the topic it was published to, the action, and the request's
deadline. The token rides in the action URL's query; it is never logged.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

from approval_guard.provider.channels.links import (
    APPROVE,
    DENY,
    Link,
    LinkRefused,
    make_token,
    read_token,
)
from approval_guard.provider.channels.public_url import public_link

__all__ = ["APPROVE", "DENY", "Link", "LinkRefused", "action_url", "read", "shown_topic", "sign"]

#: ntfy's signing context: its tokens are no other channel's.
CONTEXT = b"approval-guard ntfy action v1."
#: The route a button posts to (under the provider's public URL).
PATH = "/ntfy/requests/{request_id}/decision"


def sign(
    secret: bytes,
    *,
    item_id: str,
    request_id: str,
    reviewer_id: str,
    topic: str,
    action: str,
    expires_at: datetime,
) -> str:
    """The token of one button."""
    link = Link(
        mail_id=item_id,
        request_id=request_id,
        reviewer_id=reviewer_id,
        address=topic,
        action=action,
        expires_at=expires_at,
    )
    return make_token(secret, link, context=CONTEXT)


def read(secret: bytes, token: object, *, request_id: str, now: datetime) -> Link:
    """What a genuine, unexpired token for ``request_id`` says; :class:`LinkRefused` otherwise."""
    return read_token(secret, token, request_id=request_id, now=now, context=CONTEXT)


def action_url(base: str, request_id: str, token: str) -> str:
    """A button's URL: ``base`` (its path kept) + the route + ``?token=``."""
    path = PATH.format(request_id=quote(request_id, safe=""))
    return public_link(base, f"{path}?token={token}")


def shown_topic(topic: str) -> str:
    """A topic as the audit trail shows it: its first few characters, never the whole.

    Anyone who knows a topic can read it (on ntfy.sh) and tap its buttons as its
    reviewer, and every reviewer can read a request's history: ``alic…``.
    """
    return topic[: min(4, len(topic) // 4)] + "…"
