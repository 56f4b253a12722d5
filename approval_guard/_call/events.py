"""What a guarded call reports while it runs: typed, frozen events for a harness.

A harness passes ``on_event=`` (to :class:`~approval_guard.Guard` or to
``requires_approval``) to show "waiting for approval (12 min left)", to audit
calls that ran without asking, or to trace. Events carry no secret: arguments
appear only in the form sent for approval (redacted values as markers).

A callback runs in the guarded call's own thread (or event loop), between the
call's steps: one that blocks holds the call up, which is the caller's
business. One that raises never changes the outcome; its first failure in a
call is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Union

import attrs

from approval_guard._call.outcome import NotRun

log = logging.getLogger("approval_guard")


@attrs.frozen
class ApprovalSkipped:
    """``when`` said this call needs no approval: it runs at once, and no request was made.

    Attributes:
        tool: The tool's name, as sent for approval.
        arguments: The arguments as they would have been sent for approval (redacted values as
            markers).
    """

    tool: str
    #: The arguments as they would have been sent for approval (redacted values as markers).
    arguments: dict[str, Any]


@attrs.frozen
class RequestCreated:
    """The approval request exists at the provider (made now, or adopted on a replay).

    Attributes:
        tool: The tool's name, as sent for approval.
        request_id: The approval request's id at the provider.
        deadline_at: The provider's deadline for a decision.
        provider_request_id: The provider's ``X-Request-ID`` for the answer, if it sent one.
    """

    tool: str
    request_id: str
    #: The provider's deadline for a decision.
    deadline_at: datetime
    #: The provider's ``X-Request-ID`` for the answer, if it sent one.
    provider_request_id: str | None = None


@attrs.frozen
class StillWaiting:
    """A poll came back undecided; the call waits on.

    Attributes:
        tool: The tool's name, as sent for approval.
        request_id: The approval request's id at the provider.
        seconds_left: Seconds until the call stops waiting (the provider's deadline or the harness's
            limit).
        deadline_at: The provider's deadline for a decision.
        approvals: While a request needs several approvals (API 1.1): how many it has so far; else
            None.
        approvals_required: How many approvals it needs, with ``approvals``; else None.
    """

    tool: str
    request_id: str
    #: Seconds until the call stops waiting (the provider's deadline or the harness's limit).
    seconds_left: float
    deadline_at: datetime
    #: While a request needs several approvals (API 1.1): how many it has, of how many.
    approvals: int | None = None
    approvals_required: int | None = None


@attrs.frozen
class Decided:
    """The request was approved or denied: by a person, their standing grant, or a rule.

    Attributes:
        tool: The tool's name, as sent for approval.
        request_id: The approval request's id at the provider.
        status: ``"approved"`` or ``"denied"``.
        note: The reviewer's note, if any.
        decided_by: The reviewer, as the provider names them (API 1.1 ``decided_by``), if it does;
            every approver, ``"alice, bob"``, when several had to approve; the granter for a
            grant; ``"rule:NAME"`` for a rules-file auto-decision.
        grant_id: API 1.3: the standing grant (or standing denial) that decided it as it was made.
        granted_by: Who gave that grant, ``"alice"`` or ``"alice, bob"``.
        rule: API 1.3: the name of the rules file's auto-decision that decided it.
    """

    tool: str
    request_id: str
    status: str  # "approved" or "denied"
    note: str | None = None
    #: The reviewer, as the provider names them (API 1.1 ``decided_by``), if it does;
    #: every approver, ``"alice, bob"``, when several had to approve; the granter for a
    #: grant; ``"rule:NAME"`` for a rules-file auto-decision.
    decided_by: str | None = None
    #: API 1.3: the standing grant (or standing denial) that decided it at create time.
    grant_id: str | None = None
    #: Who gave that grant, ``"alice"`` or ``"alice, bob"``.
    granted_by: str | None = None
    #: API 1.3: the rules file's auto-decision that decided it (its ``name``).
    rule: str | None = None


@attrs.frozen
class ArgumentsEdited:
    """The reviewer approved the call with changed arguments; the tool runs with ``after``.

    Attributes:
        tool: The tool's name, as sent for approval.
        request_id: The approval request's id at the provider.
        before: The arguments as sent for approval.
        after: The arguments the reviewer approved, edits in place (what the tool runs with).
        changed: The names of the changed arguments, sorted.
    """

    tool: str
    request_id: str
    before: dict[str, Any]
    after: dict[str, Any]
    changed: tuple[str, ...]


@attrs.frozen
class ToolStarted:
    """The tool is being called now (``request_id`` None: ``when`` skipped approval).

    The approval's expiry is checked once more after the callbacks return: one
    that blocks past it is followed by ``CallNotRun`` (``APPROVAL_EXPIRED``) instead.

    Attributes:
        tool: The tool's name, as sent for approval.
        request_id: The approved request's id; None when ``when`` skipped approval.
    """

    tool: str
    request_id: str | None = None


@attrs.frozen
class ToolFinished:
    """The tool returned, or raised (``error``: the exception's type name).

    Attributes:
        tool: The tool's name, as sent for approval.
        request_id: The approved request's id; None when ``when`` skipped approval.
        error: The type name of the exception the tool raised; None when it returned.
    """

    tool: str
    request_id: str | None = None
    error: str | None = None


@attrs.frozen
class CallNotRun:
    """The call ended without running the tool.

    Attributes:
        not_run: Why the tool did not run: the call's :class:`~approval_guard.NotRun`.
    """

    not_run: NotRun

    @property
    def tool(self) -> str:
        return self.not_run.tool


Event = Union[  # noqa: UP007 (a runtime alias on 3.10)
    ApprovalSkipped,
    RequestCreated,
    StillWaiting,
    Decided,
    ArgumentsEdited,
    ToolStarted,
    ToolFinished,
    CallNotRun,
]
OnEvent = Callable[[Any], object]


def check_on_event(on_event: OnEvent | None) -> OnEvent | None:
    """``on_event`` as given, if it is None or callable; else a ConfigurationError."""
    from approval_guard.exceptions import ConfigurationError

    if on_event is not None and not callable(on_event):
        raise ConfigurationError("on_event must be a callable taking one event")
    return on_event


class Emitter:
    """One call's event sinks: each event goes to every sink, in order, never raising."""

    __slots__ = ("_failed", "_sinks", "values")

    def __init__(self, sinks: Sequence[OnEvent], *, values: bool = True) -> None:
        self._sinks = tuple(sinks)
        self._failed = False
        #: Some sink may read argument values (a user's callback; a span never does).
        self.values = values

    def __bool__(self) -> bool:
        return bool(self._sinks)

    def __call__(self, event: Event) -> None:
        for sink in self._sinks:
            try:
                result = sink(event)
            except Exception:
                self._failure(event, exc_info=True)
                continue
            close = getattr(result, "close", None)
            if result is not None and callable(close) and hasattr(result, "send"):
                # An async callback's coroutine: never awaited here, so closed unrun.
                close()
                self._failure(
                    event, exc_info=False, why="returned a coroutine (use a plain function)"
                )

    def _failure(self, event: Event, *, exc_info: bool, why: str = "raised") -> None:
        if self._failed:
            log.debug("on_event callback %s again at %s", why, type(event).__name__)
            return
        self._failed = True
        log.warning(
            "an on_event callback %s at %s; the call goes on unchanged",
            why,
            type(event).__name__,
            exc_info=exc_info,
        )


NO_EVENTS = Emitter(())
