"""Sending the mail outbox: a background task that signs each mail's links, sends, and retries.

One :class:`Mailer` runs on the server's event loop while it serves (as the
webhook deliverer does). It claims due mails with a lease, and for each
reads the request and the reviewer afresh: a request no longer pending, or a
reviewer removed (or given another address) since, is not mailed
(``skipped``). Otherwise it signs the approve and deny links, composes the
message and sends it with ``smtplib`` in the thread pool (the loop never
waits on SMTP). A failure is retried with capped exponential backoff and
jitter until the request's deadline, then given up; an SMTP outage never
delays a request or a decision, and a restart resumes from the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from datetime import timedelta
from email.message import EmailMessage
from urllib.parse import quote

import anyio
from starlette.concurrency import run_in_threadpool

from approval_guard.provider.channels.links import public_link
from approval_guard.provider.email.links import APPROVE, DENY, Link, make_token
from approval_guard.provider.email.message import compose
from approval_guard.provider.email.settings import EmailSettings
from approval_guard.provider.email.smtp import error_text, send
from approval_guard.provider.http.render import listed_request_json
from approval_guard.provider.rules.config import Rules
from approval_guard.provider.store.models import StoreClosedError
from approval_guard.provider.store.protocol import StoreProtocol
from approval_guard.provider.store.sql.audit import SYSTEM
from approval_guard.provider.store.sql.mail import (
    MAIL_GIVEN_UP,
    MAIL_PENDING,
    MAIL_SENT,
    MAIL_SKIPPED,
    MailItem,
)
from approval_guard.provider.webhooks.in_flight import finish_in_flight

logger = logging.getLogger("approval_guard.provider")

#: How long a claimed mail is ours; longer than a send, so it never runs out mid-send.
LEASE_SECONDS = 60.0
#: Mails sent at once.
CONCURRENCY = 4
#: The longest the task sleeps without looking (another instance's retries come due).
IDLE_SECONDS = 5.0
MIN_REST = 0.02


def link_url(base: str, request_id: str, token: str) -> str:
    """The confirmation page's address for one link."""
    return public_link(base, f"/email/requests/{quote(request_id, safe='')}?token={token}")


class Mailer:
    """The mail outbox's sending task for one serving run."""

    def __init__(
        self, store: StoreProtocol, settings: EmailSettings, rules: Rules, base_url: str
    ) -> None:
        self.store = store
        self.settings = settings
        self.rules = rules
        self.base_url = base_url.rstrip("/")
        self.owner = secrets.token_hex(8)
        self._inflight: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None

    async def run(self) -> None:
        """Send until cancelled; then give back the leases of mails not settled."""
        loop = asyncio.get_running_loop()
        wake = self._wake = asyncio.Event()

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
                await asyncio.shield(run_in_threadpool(self.store.release_mail, owner=self.owner))

    async def _loop(self, wake: asyncio.Event) -> None:
        while True:
            wake.clear()
            room = CONCURRENCY - len(self._inflight)
            if room <= 0:
                with anyio.move_on_after(IDLE_SECONDS):
                    await wake.wait()
                continue
            try:
                items = await run_in_threadpool(
                    self.store.claim_mail, owner=self.owner, limit=room, lease=LEASE_SECONDS
                )
                due = None if items else await run_in_threadpool(self.store.next_mail_due)
            except StoreClosedError:
                return
            except Exception:
                logger.exception("reading the mail outbox failed")
                items, due = [], None
            for item in items:
                task = asyncio.create_task(self._send(item), name="approval-guard-mail")
                self._inflight.add(task)
                task.add_done_callback(self._done)
            if items:
                continue
            timeout = IDLE_SECONDS
            if due is not None:
                left = (due - self.store.now()).total_seconds()
                timeout = min(timeout, max(MIN_REST, left + 0.001))
            with anyio.move_on_after(timeout):
                await wake.wait()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        if self._wake is not None:
            self._wake.set()

    def _message(self, item: MailItem) -> tuple[EmailMessage | None, str | None]:
        """``(message, None)`` to send, or ``(None, why)`` when this mail must not go."""
        store = self.store
        why = self._why_not(item)
        if why is not None:
            return None, why
        request = store.get_request(item.request_id)
        reviewer = store.credential(item.reviewer_id)
        if request is None or reviewer is None:  # gone since the look just taken
            return None, "the request was no longer pending"
        secret = store.email_link_secret()
        urls = {}
        for action in (APPROVE, DENY):
            link = Link(
                mail_id=item.id,
                request_id=request.id,
                reviewer_id=reviewer.id,
                address=item.address,
                action=action,
                expires_at=request.deadline_at,
            )
            urls[action] = link_url(self.base_url, request.id, make_token(secret, link))
        display = listed_request_json(
            request, viewer=reviewer, rule=self.rules.for_tool(request.tool)
        )["display"]
        message = compose(
            request=request,
            display=display,
            reviewer=reviewer.name,
            sender=self.settings.sender,
            recipient=item.address,
            approve_url=urls[APPROVE],
            deny_url=urls[DENY],
        )
        return message, None

    def _why_not(self, item: MailItem) -> str | None:
        """Why this mail must not go now, or None: asked as it is made, and just before it goes."""
        store = self.store
        request = store.get_request(item.request_id)
        if request is None or not request.is_pending:
            return "the request was no longer pending"
        reviewer = store.credential(item.reviewer_id)
        if reviewer is None or reviewer.revoked_at is not None:
            return "the reviewer was removed"
        if store.reviewer_emails().get(reviewer.id) != item.address:
            return "the reviewer's address changed"
        return None

    def _attempt(self, item: MailItem) -> tuple[str, str]:
        """Make and send one mail (in a thread): ``(state, result)``."""
        message, why = self._message(item)
        if message is None:
            return MAIL_SKIPPED, f"not sent: {why}"
        late: list[str] = []

        def still_wanted() -> bool:
            # Connecting can take long (an SMTP outage ending): the request may be decided by now.
            why = self._why_not(item)
            late.extend([] if why is None else [why])
            return why is None

        if not send(
            self.settings.smtp,
            message,
            timeout=self.settings.timeout,
            tls_context=self.settings.tls_context,
            still_wanted=still_wanted,
        ):
            return MAIL_SKIPPED, f"not sent: {late[0]}"
        return MAIL_SENT, "sent"

    async def _send(self, item: MailItem) -> None:
        attempt = item.attempts + 1
        try:
            state, result = await run_in_threadpool(self._attempt, item)
        except StoreClosedError:
            return
        except Exception as exc:  # SMTP refused, unreachable, timed out...
            state, result = MAIL_PENDING, error_text(exc, self.settings.smtp)
        at = self.store.now()
        next_at = None
        if state == MAIL_PENDING:
            next_at = at + timedelta(seconds=self.settings.backoff.delay(attempt))
            request = None
            with contextlib.suppress(Exception):
                request = await run_in_threadpool(self.store.get_request, item.request_id)
            if request is None or next_at >= request.deadline_at:
                state, next_at = MAIL_GIVEN_UP, None  # its links would expire unused
        try:
            kept = await run_in_threadpool(
                lambda: self.store.settle_mail(
                    item.id,
                    owner=self.owner,
                    attempt=attempt,
                    at=at,
                    result=result,
                    state=state,
                    next_attempt_at=next_at,
                )
            )
        except StoreClosedError:
            return
        if not kept:
            logger.warning("mail %s: the lease ran out before it was settled", item.id)
            return
        if state == MAIL_PENDING:
            logger.info("mail %s to %s failed (%s); retrying", item.id, item.address, result)
            return
        logger.info(
            "mail %s for request %s to %s: %s", item.id, item.request_id, item.address, result
        )
        action = {MAIL_SENT: "email.sent", MAIL_SKIPPED: "email.skipped"}.get(
            state, "email.given_up"
        )
        detail = {"mail_id": item.id, "to": item.address, "attempts": attempt, "result": result}
        try:
            await run_in_threadpool(
                self.store.record_audit, action, SYSTEM, "email", item.request_id, detail
            )
        except Exception:
            logger.exception("recording mail %s in the audit trail failed", item.id)
