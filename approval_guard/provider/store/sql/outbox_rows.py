"""The outbox's rows as read: an item, its state and its attempts.

What :meth:`~approval_guard.provider.store.sql.outbox.OutboxMixin.list_outbox`
returns and the worker claims. Tables: :mod:`.outbox_tables`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from approval_guard._codec.exact_json import load_stored
from approval_guard.provider.channels.base import Item
from approval_guard.provider.store.sql.base import from_us


@attrs.frozen
class Attempt:
    """One try at sending an item: when, what came back, and when the next one is due."""

    attempt: int
    at: datetime
    status_code: int | None
    error: str | None
    next_attempt_at: datetime | None

    @property
    def result(self) -> str:
        """``"HTTP 500"``, or the error (``"ConnectError: ..."``)."""
        return f"HTTP {self.status_code}" if self.status_code is not None else (self.error or "")


@attrs.frozen
class OutboxRow:
    """One row of the outbox as listed: the item, its state and its attempts."""

    item: Item
    state: str
    next_attempt_at: datetime | None
    last_result: str | None
    delivered_at: datetime | None
    history: tuple[Attempt, ...] = ()

    @property
    def id(self) -> str:
        """The item's id (a webhook's ``webhook-id``)."""
        return self.item.id

    @property
    def channel(self) -> str:
        """The channel it is for."""
        return self.item.channel

    @property
    def target(self) -> str:
        """Where it goes (a URL, ``slack:C0123``, an address, a topic)."""
        return self.item.target

    @property
    def request_id(self) -> str:
        """The request it is about."""
        return self.item.request_id

    @property
    def event_type(self) -> str:
        """What it is (``request.created``, ``slack.update``...)."""
        return self.item.event_type

    @property
    def attempts(self) -> int:
        """Tries so far."""
        return self.item.attempts


def item_from_row(row: Any) -> Item:
    """The :class:`Item` a row holds."""
    created = from_us(row["created_at"])
    assert created is not None
    return Item(
        id=row["id"],
        seq=int(row["seq"]),
        channel=row["channel"],
        target=row["target"],
        event_type=row["event_type"],
        request_id=row["request_id"],
        reviewer_id=row["reviewer_id"],
        format=row["body_format"],
        payload=load_stored(row["payload"]),
        created_at=created,
        attempts=int(row["attempts"]),
    )


def outbox_row(row: Any, history: tuple[Attempt, ...] = ()) -> OutboxRow:
    """The :class:`OutboxRow` a row of ``outbox`` and its attempts make."""
    return OutboxRow(
        item=item_from_row(row),
        state=row["state"],
        next_attempt_at=from_us(row["next_attempt_at"]),
        last_result=row["last_result"],
        delivered_at=from_us(row["delivered_at"]),
        history=history,
    )


def attempt_from_row(row: Any) -> Attempt:
    """The :class:`Attempt` a row of ``outbox_attempts`` holds."""
    at = from_us(row["at"])
    assert at is not None
    return Attempt(
        attempt=int(row["attempt"]),
        at=at,
        status_code=None if row["status_code"] is None else int(row["status_code"]),
        error=row["error"],
        next_attempt_at=from_us(row["next_attempt_at"]),
    )
