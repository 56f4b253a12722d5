"""What a channel is: the one interface every way of reaching reviewers implements.

A channel (webhooks, Slack, email, and each one registered since) declares, as a subclass of
:class:`ChannelKind`:

- its ``name`` (the outbox rows' ``channel``, the audit rows' ``channel``);
- its settings: ``serve`` flags (:meth:`ChannelKind.add_arguments`), the
  environment variables its secrets may come from, and how a configured
  channel is made from them (:meth:`ChannelKind.from_args`, raising
  :class:`ChannelSettingsError` with a clear message at start);
- the identity it links a reviewer to (:attr:`ChannelKind.identity`, used by
  ``approval-guard reviewers link NAME --channel KIND:ID`` and its own flag);

and, once configured, as a :class:`Channel`:

- what it queues for each moment of a request's life (:meth:`Channel.queue`,
  called inside the transaction that made the change, so nothing is lost);
- how it sends one queued item (:meth:`Channel.send`), answering
  :class:`Sent`, :class:`Retry` (after N seconds, or the outbox's backoff) or
  :class:`Permanent` (no retry can mend it; audited and logged without
  secrets);
- its inbound routes (:meth:`Channel.routes`).

The one outbox (:mod:`~approval_guard.provider.channels.outbox`) claims,
leases, retries and gives up; a channel only says how to send one item.
"""

from __future__ import annotations

import abc
import argparse
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from approval_guard.exceptions import ProviderError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from approval_guard.provider.http.context import Context
    from approval_guard.provider.rules.config import Rules
    from approval_guard.provider.store.models import StoredRequest
    from approval_guard.provider.store.protocol import StoreProtocol

#: The moments of a request's life a channel may hear of.
CREATED = "created"
#: One approval of several counted (a quorum); the request is still pending.
APPROVAL = "approval"
DECIDED = "decided"
EXPIRED = "expired"
CANCELLED = "cancelled"
MOMENTS = (CREATED, APPROVAL, DECIDED, EXPIRED, CANCELLED)

#: An outbox item's states.
PENDING_DELIVERY = "pending"
DELIVERED = "delivered"
GIVEN_UP = "given_up"
#: Not sent, on purpose: the request was decided, or the reviewer removed, before it went.
SKIPPED = "skipped"
#: Its reviewer's identity changed after it was queued: never sent, its links decide nothing.
VOIDED = "voided"
DELIVERY_STATES = (PENDING_DELIVERY, DELIVERED, GIVEN_UP, SKIPPED, VOIDED)


@attrs.frozen
class Backoff:
    """When to try again: ``base * 2**(n-1)`` seconds, at most ``cap``, times a jitter."""

    base: float = 5.0
    cap: float = 1800.0
    give_up_after: float = 24 * 3600.0
    jitter: float = 0.2

    def delay(self, attempts: int) -> float:
        """Seconds before the next try, after ``attempts`` failed ones."""
        raw = min(self.cap, self.base * 2.0 ** min(attempts - 1, 62))
        return float(min(self.cap, raw * random.uniform(1 - self.jitter, 1 + self.jitter)))


#: The label above an agent's stated reason, on every channel: its own words.
AGENT_SAYS = "The agent says:"


class ChannelSettingsError(ProviderError, ValueError):
    """A channel's settings cannot work: ``serve`` stops with this message (no secret in it)."""


@attrs.frozen
class Sent:
    """The item reached its receiver; ``detail`` (optional) is kept as its last result."""

    detail: str = "sent"
    status: int | None = None


@attrs.frozen
class Retry:
    """Not sent this time: try again after ``after`` seconds (None: the outbox's backoff)."""

    reason: str
    after: float | None = None
    #: The HTTP status that asked for the retry (kept with the attempt), if any.
    status: int | None = None
    #: No retry after this (an email's links expire with the request).
    until: datetime | None = None


@attrs.frozen
class Permanent:
    """Never sendable (a bad token, a message gone): stop retrying, audit, log ``reason``."""

    reason: str
    status: int | None = None


@attrs.frozen
class Skipped:
    """Not sent, on purpose (the request was decided, the reviewer removed, before it went)."""

    reason: str


SendResult = Sent | Retry | Permanent | Skipped


@attrs.frozen
class Reviewer:
    """A live reviewer as a channel sees one when queueing: who, their roles, their identity."""

    id: str
    name: str
    roles: tuple[str, ...]
    #: Their identity on this channel (a topic, a user id, an address), or None if unlinked.
    identity: str | None


@attrs.frozen
class Moment:
    """One change of one request, as :meth:`Channel.queue` hears of it (inside its transaction)."""

    kind: str
    at: datetime
    seq: int
    request: StoredRequest
    #: Who decided, by name (every approver of a quorum, ``"alice, bob"``), or None.
    decided_by: str | None
    #: The live reviewers, each with this channel's identity (or None).
    reviewers: tuple[Reviewer, ...]
    #: The rules in force (``rules.for_tool(request.tool)`` says who may decide).
    rules: Rules

    def deciders(self) -> tuple[Reviewer, ...]:
        """The linked reviewers the tool's rule lets decide this request (self-approval too)."""
        from approval_guard.provider.rules.checks import same_person

        rule = self.rules.for_tool(self.request.tool)
        requested_by = self.request.requested_by
        return tuple(
            one
            for one in self.reviewers
            if one.identity is not None
            and rule.may_decide(one.roles)
            and (
                rule.self_approval
                or requested_by is None
                or not same_person(one.name, requested_by)
            )
        )


@attrs.frozen
class NewItem:
    """What :meth:`Channel.queue` asks the outbox to send: one row, sent at least once."""

    #: Where it goes, on this channel (a URL, ``slack:C0123``, an address, a topic).
    target: str
    #: What it is (``request.created``, ``slack.update``...).
    event_type: str
    #: Anything JSON the channel needs to send it (never a secret: it is stored).
    payload: Mapping[str, Any]
    #: The reviewer it is for, when it is for one person (their links are bound to them).
    reviewer_id: str | None = None
    #: The body's format, when the target has one (a webhook's ``standard`` or ``slack``).
    format: str = ""
    #: Its id, when the channel must know it ahead (the webhook-id); else one is made.
    id: str | None = None


@attrs.frozen
class Item:
    """One row of the outbox, claimed: what :meth:`Channel.send` is given."""

    id: str
    seq: int
    channel: str
    target: str
    event_type: str
    request_id: str
    reviewer_id: str | None
    format: str
    payload: dict[str, Any]
    created_at: datetime
    attempts: int


#: An inbound route: ``(path, {method: handler(ctx, request)})``.
Handler = Callable[["Context", "Request"], Awaitable["Response"]]
Route = tuple[str, Mapping[str, Handler]]


@attrs.frozen
class Identity:
    """What a channel links a reviewer to, for ``reviewers link``."""

    #: The ``KIND`` of ``--channel KIND:ID`` (``slack``, ``email``...).
    kind: str
    #: Its own flag of ``reviewers link`` (``--slack-user``), for the same link.
    flag: str
    #: What the flag's value is, for ``--help`` (``TOPIC``).
    metavar: str
    #: ``check(value) -> value`` as stored; ValueError with a clear message otherwise.
    check: Callable[[str], str]
    #: Whether two live reviewers may share one identity (never, when a click names a person).
    unique: bool = True


class Channel(abc.ABC):
    """A configured channel for one serving run (see the module's docstring)."""

    #: Its name: the outbox rows' and the audit rows' ``channel``.
    name: ClassVar[str] = ""
    #: Seconds a send may take in all, connect to last byte (shorter than the outbox's lease).
    deadline: float = 10.0
    #: Seconds after its change when an item is given up.
    horizon: float = 24 * 3600.0
    #: When to try again (None: the outbox's, from ``--webhook-backoff``).
    backoff: Backoff | None = None
    #: Items sent at once to one target (1: in order, a post before its updates).
    per_target: ClassVar[int] = 4
    #: Items of this channel sent at once, every target together (None: as many as the
    #: outbox has slots). Set when every target goes through one server (an SMTP
    #: server, a push server), so that server, slow, never holds every slot.
    at_once: ClassVar[int | None] = None
    #: The identity kind whose links :attr:`Moment.reviewers` carries (None: none needed).
    links: ClassVar[str | None] = None
    #: The audit actions of an item sent, and given up (None: not audited).
    audit_sent: ClassVar[str | None] = None
    audit_given_up: ClassVar[str | None] = None
    audit_skipped: ClassVar[str | None] = None
    #: The audit rows' source (its name, unless it had another before).
    audit_source: ClassVar[str] = ""

    def audit_detail(self, item: Item, attempts: int, result: str) -> dict[str, Any]:
        """What an audit row of ``item`` says (never a secret)."""
        return {
            "item": item.id,
            "event": item.event_type,
            "target": item.target,
            "attempts": attempts,
            "result": result,
        }

    def queue(self, moment: Moment) -> Sequence[NewItem]:
        """Inside the change's transaction: the items this moment makes (none by default)."""
        del moment
        return ()

    @abc.abstractmethod
    async def send(self, item: Item, store: StoreProtocol) -> SendResult:
        """Send one item; the outbox bounds it by :attr:`deadline` and settles it."""

    def routes(self) -> Sequence[Route]:
        """Its inbound routes (``POST /slack/interactions``), none by default."""
        return ()

    async def close(self) -> None:
        """Release what :meth:`send` opened (an HTTP client); the outbox calls it when it stops."""
        return None


class ChannelKind:
    """A kind of channel: its settings, its identity, and how one is made from them."""

    #: Its name (as :attr:`Channel.name`).
    name: ClassVar[str] = ""
    #: The identity it links a reviewer to, or None (webhooks link nobody).
    identity: ClassVar[Identity | None] = None
    #: The environment variables its secrets may come from (documented, never logged).
    env: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
        """Add its ``serve`` flags (``env``: the environment, for defaults read from it)."""

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, env: Mapping[str, str], *, public_url: str | None
    ) -> Channel | None:
        """The configured channel the flags ask for, or None (not asked for).

        :class:`ChannelSettingsError` for settings that cannot work. Webhooks,
        Slack and email answer None: ``ProviderServer`` takes them as its own
        ``webhooks=``, ``slack=`` and ``email=`` (a public contract older than
        this interface), and makes their channels itself.
        """
        del args, env, public_url
        return None


#: ``rules_for(tool)`` as channels read it.
RulesFor = Callable[[str], Any]
