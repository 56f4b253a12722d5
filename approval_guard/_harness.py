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
from datetime import datetime

import attrs

from approval_guard._codec.clock import Clock
from approval_guard._codec.duration import DurationLike
from approval_guard._options.spec import (
    check_batch,
    check_key,
    check_reason,
    check_requested_by,
    seconds_option,
)
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
        batch: The agent's turn this call belongs to (API 1.3 ``batch``).
        reason: The agent's stated reason for this call (sent as API 1.3 ``context``).
        started_at: When the harness first started this tool call (aware): the limit
            counts from then.
    """

    idempotency_key: str | None = None
    limit: float | None = None
    abandon: threading.Event | None = None
    #: The person this call is made for (overrides ``Guard(requested_by=...)``).
    requested_by: str | None = None
    batch: str | None = None
    reason: str | None = None
    started_at: datetime | None = None


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


class in_batch:  # used as a function is: ``with in_batch(turn_id):``
    """An integration's block whose guarded calls belong to ``batch`` (the agent's turn).

    Keeps every other fact of an enclosing :func:`harness_call`, and its batch if it
    names one (the application's own word wins). ``batch`` None, or not a usable id
    (see :func:`harness_call`), changes nothing: the calls are sent without one.
    """

    __slots__ = ("_batch", "_token")

    def __init__(self, batch: str | None) -> None:
        self._batch = batch
        self._token: contextvars.Token[HarnessCall | None] | None = None

    def __enter__(self) -> None:
        batch = self._batch
        facts = current()
        if batch is None or facts.batch is not None:
            return
        try:
            check_batch(batch)
        except ConfigurationError:
            return
        self._token = _HARNESS.set(attrs.evolve(facts, batch=batch))

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _HARNESS.reset(self._token)
            self._token = None


@contextmanager
def harness_call(
    *,
    idempotency_key: str | None = None,
    limit: DurationLike | None = None,
    abandon: threading.Event | None = None,
    requested_by: str | None = None,
    batch: str | None = None,
    reason: str | None = None,
    started_at: datetime | None = None,
) -> Iterator[HarnessCall]:
    """Tell guarded calls made inside the block what the harness knows about this tool call.

    ``batch`` and ``reason`` need a provider that serves API 1.3: an older one
    refuses the create (400), and the call returns ``NotRun(NOT_OBTAINED)`` without
    running. Without them the request is exactly as before.

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
        batch: The id of the agent's turn (or run step) this call belongs to, sent as API
            1.3's ``batch`` so a reviewer sees a turn's requests together and may decide
            them at once; 1 to 200 printable characters.
        reason: The agent's own sentence saying why it makes this call, sent as API 1.3's
            ``context`` and shown to the reviewer as the agent's words (nothing is decided
            from it); a longer one than 1,000 characters is cut to fit, ending
            ``" [… cut]"``. It takes the place of the tool's ``describe=`` sentence.
        started_at: When the harness first started this tool call (an aware ``datetime``):
            a durable harness that runs the call again after a crash passes its first
            attempt's time, so ``limit`` counts from then (``approval_guard.dbos`` does).
    """
    if idempotency_key is not None:
        check_key(idempotency_key)
    seconds = None if limit is None else seconds_option(limit, "limit")
    if abandon is not None and not callable(getattr(abandon, "is_set", None)):
        raise ConfigurationError("abandon must be a threading.Event (or have is_set() and wait())")
    if requested_by is not None:
        check_requested_by(requested_by)
    if batch is not None:
        check_batch(batch)
    if reason is not None:
        check_reason(reason)
    if started_at is not None and (
        not isinstance(started_at, datetime) or started_at.utcoffset() is None
    ):
        raise ConfigurationError("started_at must be a datetime with a time zone")
    facts = HarnessCall(
        idempotency_key=idempotency_key,
        limit=seconds,
        abandon=abandon,
        requested_by=requested_by,
        batch=batch,
        reason=reason,
        started_at=started_at,
    )
    token = _HARNESS.set(facts)
    try:
        yield facts
    finally:
        _HARNESS.reset(token)


@contextmanager
def using(facts: HarnessCall) -> Iterator[HarnessCall]:
    """Make ``facts`` (checked already) the current harness facts for a block."""
    token = _HARNESS.set(facts)
    try:
        yield facts
    finally:
        _HARNESS.reset(token)


def first_start(started_at: datetime, clock: Clock, started: float | None) -> float:
    """When the call began on ``clock``'s monotonic scale, counting from ``started_at``.

    A durable harness's first attempt: the limit counts from then. Only the
    deadlines move; the request's bytes stay those of the first attempt.
    """
    spent = max(0.0, (clock.now() - started_at).total_seconds())
    begun = clock.monotonic() - spent
    return begun if started is None else min(started, begun)
