"""What every route handler works with: the store, the loop's notifier, the settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
from starlette.requests import Request
from starlette.responses import Response

from approval_guard.provider.http.auth import CredentialHints
from approval_guard.provider.http.store_calls import StoreCalls
from approval_guard.provider.http.waits import Notifier
from approval_guard.provider.rules.config import NO_RULES, Rules
from approval_guard.provider.store.protocol import StoreProtocol


@attrs.define(eq=False)
class Context:
    """One serving run's shared state (a new one after each start)."""

    store: StoreProtocol
    notifier: Notifier
    #: How handlers run store work (on the loop when nothing waits, else a worker thread).
    calls: StoreCalls
    poll_cap: float
    #: Seconds a client has to send a request body.
    client_timeout: float = 20.0
    #: A message for the review page's banner (the demo says it has finished), or None.
    notice: str | None = None
    #: The change sequence of the last list of requests a reviewer was answered.
    listed_seq: int = -1
    #: True once the review page itself (not the login form) was served.
    page_served: bool = False
    #: True once a change-feed answer carried the current :attr:`notice`.
    notice_delivered: bool = False
    #: The rules file's per-tool rules (none: every tool as before).
    rules: Rules = NO_RULES
    #: Which credential each bearer token named, for a create's checks before its store trip.
    hints: CredentialHints = attrs.field(factory=CredentialHints)


Handler = Callable[[Context, Request], Awaitable[Response]]
