"""Reporting one guarded call as it ends: its events, its span, and what the caller gets back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from approval_guard import _harness
from approval_guard._call.events import (
    NO_EVENTS,
    ApprovalSkipped,
    CallNotRun,
    Emitter,
    OnEvent,
    ToolFinished,
    ToolStarted,
)
from approval_guard._call.ops import Ran
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._options.advice import advice_for

if TYPE_CHECKING:
    from approval_guard._options.spec import ToolSpec
    from approval_guard._otel import CallSpan

log = logging.getLogger("approval_guard")


@attrs.frozen(slots=False)  # dict-backed, as CallPlan is: one per call
class Report:
    """Where one call's events and span go, and how its outcome becomes the caller's value."""

    spec: ToolSpec
    emit: Emitter
    span: CallSpan | None

    @classmethod
    def of(cls, spec: ToolSpec, guard_sink: OnEvent | None, span: CallSpan | None) -> Report:
        if guard_sink is None and spec.on_event is None and span is None:
            return cls(spec, NO_EVENTS, None)
        sinks = [sink for sink in (guard_sink, spec.on_event, span) if sink is not None]
        # A span never shows argument values: events only it sees need not carry them.
        values = guard_sink is not None or spec.on_event is not None
        return cls(spec, Emitter(sinks, values=values), span)

    def skipped(self, shown: Callable[[], dict[str, Any]]) -> NotRun | None:
        """``when`` said no: say so (INFO, and events) before the tool runs at once.

        ``shown`` gives the arguments as a reviewer would have seen them (asked only
        when a sink wants values). A NotRun instead when the harness already abandoned
        the call.
        """
        spec = self.spec
        abandon = _harness.current().abandon
        if abandon is not None and abandon.is_set():
            return NotRun(
                reason=Reason.CANCELLED,
                message=f"The call to {spec.name} was abandoned by the harness before it "
                "could start, so it did not run.",
                tool=spec.name,
                advice=advice_for(Reason.CANCELLED, spec.messages),
            )
        if log.isEnabledFor(logging.INFO):
            log.info("approval not needed for %s (when= returned False): running it now", spec.name)
        if self.emit:
            self.emit(
                ApprovalSkipped(tool=spec.name, arguments=shown() if self.emit.values else {})
            )
            self.emit(ToolStarted(tool=spec.name))
        return None

    def finished_unasked(self, exc: BaseException | None) -> None:
        """A tool ``when`` let run at once has returned (``exc=None``) or raised."""
        if self.emit:
            self.emit(
                ToolFinished(tool=self.spec.name, error=None if exc is None else type(exc).__name__)
            )
        if exc is None:
            self.ended("skipped", None)
        else:
            self.raised(exc)

    def raised(self, exc: BaseException) -> None:
        """The call ended by an exception: the tool's own, or the caller's interruption."""
        # As on the approved path: a cancelled task or Ctrl-C is interrupted, not an error.
        interrupted = isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt))
        self.ended("interrupted" if interrupted else "raised", exc)

    def result(self, outcome: Ran | NotRun) -> Any:
        """What the caller gets: the tool's value, or the NotRun (or on_not_run's form of it)."""
        if isinstance(outcome, NotRun):
            if self.emit:
                self.emit(CallNotRun(not_run=outcome))
            self.ended(outcome.reason.value, None)
        else:
            self.ended("ran", None)
        return self.spec.result(outcome)

    def ended(self, outcome: str, exc: BaseException | None) -> None:
        """End the call's span; tracing never changes the outcome."""
        if self.span is None:
            return
        try:
            self.span.end(outcome, exc if outcome == "raised" else None)
        except Exception:
            log.warning("could not end the OpenTelemetry span", exc_info=True)
