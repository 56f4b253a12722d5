"""What the harness knows about one tool call, carried in a context variable.

:func:`harness_call` sets it; a guarded call reads it (:func:`current`) when it
plans, and clears it while its tool runs (:func:`outside`), so a guarded tool
that calls another guarded tool does not reuse the key.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from approval_guard._codec.duration import DurationLike
from approval_guard._options.spec import check_key, check_requested_by, seconds_option
from approval_guard.exceptions import ConfigurationError


@attrs.frozen
class HarnessCall:
    """Per-call facts that the harness knows (see :func:`harness_call`).

    Attributes:
        idempotency_key: The harness's own id for the tool call: a retried call with the same key
            recovers the same approval request, and the execution record runs it at most once.
        limit: How long the harness lets this call wait, in seconds (None: the Guard's
            ``harness_limit``).
        abandon: An event the harness sets when it gives up on the call: the pending request is
            cancelled and the call returns ``NotRun(CANCELLED)``.
        requested_by: The person the agent acts for in this call (overrides
            ``Guard(requested_by=...)``); 1 to 200 printable characters.
    """

    idempotency_key: str | None = None
    limit: float | None = None
    abandon: threading.Event | None = None
    #: The person this call is made for (overrides ``Guard(requested_by=...)``).
    requested_by: str | None = None


_NO_HARNESS = HarnessCall()

_HARNESS: contextvars.ContextVar[HarnessCall | None] = contextvars.ContextVar(
    "approval_guard_harness_call", default=None
)


def current() -> HarnessCall:
    """The facts of the innermost :func:`harness_call` block, or none."""
    return _HARNESS.get() or _NO_HARNESS


class outside:  # named as the function it was: ``with outside():``
    """Run a block (the tool itself) as if no :func:`harness_call` were active.

    A class rather than a generator: every guarded call's tool runs inside one.
    """

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _HARNESS.set(None)

    def __exit__(self, *exc: object) -> None:
        _HARNESS.reset(self._token)


@contextmanager
def harness_call(
    *,
    idempotency_key: str | None = None,
    limit: DurationLike | None = None,
    abandon: threading.Event | None = None,
    requested_by: str | None = None,
) -> Iterator[HarnessCall]:
    """Tell guarded calls made inside the block what the harness knows about this tool call.

    - ``idempotency_key``: the harness's own id for the tool call. A harness that
      retries the call (after a crash, on another worker) passes the same key, so
      the same approval request is recovered instead of a second one created; the
      execution record then makes sure it runs at most once.
    - ``limit``: how long the harness lets this call wait (overrides
      ``Guard(harness_limit=...)``).
    - ``abandon``: an event the harness sets when it gives up on the call; the
      pending request is then cancelled and the call returns ``NotRun(CANCELLED)``.
    - ``requested_by``: the person the agent acts for in this call (overrides
      ``Guard(requested_by=...)``), sent with the request; a provider may refuse
      that person's own approval. 1 to 200 printable characters.

    It is a context variable, so it follows threads' and asyncio tasks' own
    contexts. Inside the tool itself it is cleared, so a guarded tool that calls
    another guarded tool does not reuse the key::

        with ag.harness_call(idempotency_key="toolcall_abc", limit="10m",
                             requested_by="alice@example.com"):
            out = issue_refund("payment_123", 4900)

    A bad option raises :class:`~approval_guard.exceptions.ConfigurationError` here.

    Args:
        idempotency_key: The harness's own id for the tool call: a retried call with the same key
            recovers the same approval request, and the execution record runs it at most once.
        limit: How long the harness lets this call wait (a duration or seconds; overrides
            ``Guard(harness_limit=...)``).
        abandon: An event the harness sets when it gives up on the call: the pending request is
            cancelled and the call returns ``NotRun(CANCELLED)``.
        requested_by: The person the agent acts for in this call (overrides
            ``Guard(requested_by=...)``); 1 to 200 printable characters.
    """
    if idempotency_key is not None:
        check_key(idempotency_key)
    seconds = None if limit is None else seconds_option(limit, "limit")
    if abandon is not None and not callable(getattr(abandon, "is_set", None)):
        raise ConfigurationError("abandon must be a threading.Event (or have is_set() and wait())")
    if requested_by is not None:
        check_requested_by(requested_by)
    facts = HarnessCall(
        idempotency_key=idempotency_key, limit=seconds, abandon=abandon, requested_by=requested_by
    )
    token = _HARNESS.set(facts)
    try:
        yield facts
    finally:
        _HARNESS.reset(token)
