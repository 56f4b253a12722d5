"""Email as a channel: each new request mailed to the reviewers it names, with signed links.

:meth:`EmailChannel.queue` writes, when a request is created still pending,
one item per reviewer to mail (the server's ``--email-to`` and the rules'
``email_to``, narrowed to reviewers the tool's rule lets decide, each once).
:meth:`EmailChannel.send` reads the request and the reviewer afresh: a request
no longer pending, or a reviewer removed (or given another address) since, is
not mailed (skipped). Otherwise it signs the approve and deny links, composes
the message and sends it with ``smtplib`` in the thread pool. A failure is
retried with the outbox's backoff until the request's deadline (its links
would expire unused), then given up; a 5xx refusal (a bad login, no such
mailbox) is given up at once.
"""

from __future__ import annotations

import logging
import secrets
import smtplib
from collections.abc import Sequence
from email.message import EmailMessage
from typing import Any, ClassVar
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool

from approval_guard.exceptions import ProviderError
from approval_guard.provider.channels.base import (
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
from approval_guard.provider.channels.email.message import compose
from approval_guard.provider.channels.email.recipients import EmailRoutes, Reviewer, recipients
from approval_guard.provider.channels.email.settings import EmailSettings
from approval_guard.provider.channels.email.smtp import error_text, send
from approval_guard.provider.channels.links import APPROVE, DENY, Link, make_token
from approval_guard.provider.channels.public_url import public_link
from approval_guard.provider.http.render import listed_request_json
from approval_guard.provider.rules.config import Rules
from approval_guard.provider.store.protocol import StoreProtocol

logger = logging.getLogger("approval_guard.provider")

MAIL = "email.request"


def link_url(base: str, request_id: str, token: str) -> str:
    """The confirmation page's address for one link."""
    return public_link(base, f"/email/requests/{quote(request_id, safe='')}?token={token}")


def permanent_refusal(exc: BaseException) -> bool:
    """Whether the SMTP server refused for good (a 5xx: bad login, no such mailbox, refused)."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        return bool(codes) and all(500 <= code < 600 for code in codes)
    if isinstance(exc, smtplib.SMTPResponseException):
        return 500 <= exc.smtp_code < 600
    return False


class _NotSent(ProviderError):
    """Raised in the sending thread: this mail must not go (the sentence says why)."""


class EmailChannel(Channel):
    """One-click approval mail for each new request's reviewers."""

    name: ClassVar[str] = "email"
    links: ClassVar[str | None] = "email"
    audit_sent: ClassVar[str | None] = "email.sent"
    audit_given_up: ClassVar[str | None] = "email.given_up"
    audit_skipped: ClassVar[str | None] = "email.skipped"
    #: Every mail goes through the one SMTP server: a slow one holds only this many slots.
    at_once: ClassVar[int | None] = 4

    def __init__(
        self, settings: EmailSettings, routes: EmailRoutes, rules: Rules, base_url: str
    ) -> None:
        self.settings = settings
        self.mail_routes = routes
        self.rules = rules
        self.base_url = base_url.rstrip("/")
        self.horizon = settings.backoff.give_up_after
        self.backoff = settings.backoff
        # Connect, hello, TLS, login, send, quit: each read may take the settings' timeout,
        # and the session is shut at the deadline (smtp.send), so its thread ends by then.
        self.deadline = settings.timeout * 3

    def queue(self, moment: Moment) -> Sequence[NewItem]:
        request = moment.request
        if moment.kind != "created" or not request.is_pending:
            return ()  # a rule or a standing grant decided it as it was made: nobody to ask
        entries = self.mail_routes.for_tool(request.tool)
        if not entries:
            return ()
        addressed = [
            Reviewer(id=one.id, name=one.name, roles=one.roles, address=one.identity)
            for one in moment.reviewers
            if one.identity is not None
        ]
        rule = self.mail_routes.rules.for_tool(request.tool)
        chosen, unknown = recipients(entries, addressed, rule.approvers)
        for address in unknown:
            logger.warning("no live reviewer has the address %s: no mail sent to it", address)
        return [
            NewItem(
                target=one.address,
                event_type=MAIL,
                payload={},
                reviewer_id=one.id,
                id="mail_" + secrets.token_hex(12),
            )
            for one in chosen
        ]

    def audit_detail(self, item: Item, attempts: int, result: str) -> dict[str, Any]:
        return {"mail_id": item.id, "to": item.target, "attempts": attempts, "result": result}

    def routes(self) -> Sequence[Route]:
        from approval_guard.provider.channels.email import pages

        return [
            ("/email/requests/{request_id}", {"GET": pages.confirm}),
            ("/email/requests/{request_id}/decision", {"POST": pages.decide}),
        ]

    async def send(self, item: Item, store: StoreProtocol) -> SendResult:
        request = await run_in_threadpool(store.get_request, item.request_id)
        until = None if request is None else request.deadline_at
        try:
            await run_in_threadpool(self._attempt, item, store)
        except _NotSent as why:
            return Skipped(str(why))
        except Exception as exc:  # SMTP refused, unreachable, timed out...
            text = error_text(exc, self.settings.smtp)
            if permanent_refusal(exc):
                return Permanent(text)  # a 5xx: the server will refuse it every time
            return Retry(text, until=until)
        return Sent("sent")

    def _why_not(self, item: Item, store: StoreProtocol) -> str | None:
        """Why this mail must not go now, or None: asked as it is made, and just before it goes."""
        request = store.get_request(item.request_id)
        if request is None or not request.is_pending:
            return "the request was no longer pending"
        reviewer = None if item.reviewer_id is None else store.credential(item.reviewer_id)
        if reviewer is None or reviewer.revoked_at is not None:
            return "the reviewer was removed"
        if store.identities(self.name).get(reviewer.id) != item.target:
            return "the reviewer's address changed"
        return None

    def _message(self, item: Item, store: StoreProtocol) -> EmailMessage:
        why = self._why_not(item, store)
        if why is not None:
            raise _NotSent(why)
        request = store.get_request(item.request_id)
        reviewer = None if item.reviewer_id is None else store.credential(item.reviewer_id)
        if request is None or reviewer is None:  # gone since the look just taken
            raise _NotSent("the request was no longer pending")
        secret = store.link_secret()
        urls = {}
        for action in (APPROVE, DENY):
            link = Link(
                mail_id=item.id,
                request_id=request.id,
                reviewer_id=reviewer.id,
                address=item.target,
                action=action,
                expires_at=request.deadline_at,
            )
            urls[action] = link_url(self.base_url, request.id, make_token(secret, link))
        display = listed_request_json(
            request, viewer=reviewer, rule=self.rules.for_tool(request.tool)
        )["display"]
        return compose(
            request=request,
            display=display,
            reviewer=reviewer.name,
            sender=self.settings.sender,
            recipient=item.target,
            approve_url=urls[APPROVE],
            deny_url=urls[DENY],
        )

    def _attempt(self, item: Item, store: StoreProtocol) -> None:
        """Make and send one mail (in a thread); :class:`_NotSent` when it must not go."""
        message = self._message(item, store)
        late: list[str] = []

        def still_wanted() -> bool:
            # Connecting can take long (an SMTP outage ending): the request may be decided by now.
            why = self._why_not(item, store)
            late.extend([] if why is None else [why])
            return why is None

        if not send(
            self.settings.smtp,
            message,
            timeout=self.settings.timeout,
            tls_context=self.settings.tls_context,
            still_wanted=still_wanted,
            deadline=self.deadline - 1.0,
        ):
            raise _NotSent(late[0])
