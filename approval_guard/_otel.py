"""OpenTelemetry: one span per guarded call, ``approval_guard.call`` (extra ``otel``).

Only ``opentelemetry-api`` is used, and only when it is installed: without it
nothing is imported and a call is traced by nobody. The span is current while
the tool runs, so the tool's own spans are its children. Attributes say which
tool, which request, how it ended and how long it waited; span events mark
each stage. No argument value is ever put on a span. The status is ERROR only
when the tool itself raised.
"""

from __future__ import annotations

import contextlib
import logging
import os
from types import TracebackType
from typing import Any

from approval_guard._call.events import (
    ApprovalSkipped,
    ArgumentsEdited,
    CallNotRun,
    Decided,
    Event,
    RequestCreated,
    StillWaiting,
    ToolFinished,
    ToolStarted,
)

log = logging.getLogger("approval_guard")

SPAN_NAME = "approval_guard.call"
_EVENT_NAMES = {
    ApprovalSkipped: "approval_skipped",
    RequestCreated: "request_created",
    StillWaiting: "still_waiting",
    Decided: "decided",
    ArgumentsEdited: "arguments_edited",
    ToolStarted: "tool_started",
    ToolFinished: "tool_finished",
    CallNotRun: "call_not_run",
}

_trace: Any = None
_tracer: Any = None
_proxy: Any = None
_looked = False
#: Whether OTEL_PYTHON_TRACER_PROVIDER names a provider (None: not looked at yet).
_named: bool | None = None
_MISSING: Any = object()


def _api() -> Any:
    """``opentelemetry.trace``, or None when the extra is not installed (looked up once)."""
    global _trace, _tracer, _proxy, _looked
    if not _looked:
        _looked = True
        try:
            from opentelemetry import trace
        except ImportError:
            return None  # the extra is not installed
        except Exception:  # a broken install traces nothing rather than breaking calls
            log.warning("opentelemetry could not be imported", exc_info=True)
            return None
        _trace = trace
        # One tracer for the process: the API's proxy tracer follows a provider set later.
        _tracer = trace.get_tracer("approval_guard")
        # What get_tracer_provider() gives while no provider was ever set (None if unknown).
        _proxy = getattr(trace, "ProxyTracerProvider", None)
    return _trace


def tracing() -> bool:
    """True when ``opentelemetry-api`` is installed (calls then get a span)."""
    return _api() is not None


def may_trace() -> bool:
    """False when a call now would certainly get no span: no API, or no provider set.

    Asked on every guarded call. ``trace.get_tracer_provider()`` looks the
    environment up each time while no provider is set (about a microsecond), so
    the API's global is read instead, and the environment once: a provider set
    later with ``set_tracer_provider`` is still seen at the next call. True is
    no promise: :class:`call_span` decides, as it always has.
    """
    global _named
    trace = _trace if _looked else _api()
    if trace is None:
        return False
    if getattr(trace, "_TRACER_PROVIDER", _MISSING) is not None:
        return True  # set (or an API without that global: call_span asks it properly)
    if _named is None:
        _named = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
    # Named there, get_tracer_provider() loads it (in call_span, which handles a failure).
    return _named


class CallSpan:
    """One guarded call's span: fed the call's events, ended with its outcome."""

    __slots__ = ("_clock_start", "_monotonic", "_span", "_waited", "ended")

    def __init__(self, span: Any, monotonic: Any) -> None:
        self.ended = False
        self._span = span
        self._monotonic = monotonic
        self._clock_start = monotonic()
        self._waited: float | None = None

    def __call__(self, event: Event) -> None:
        span = self._span
        attributes: dict[str, Any] = {}
        if isinstance(event, RequestCreated):
            span.set_attribute("approval_guard.request_id", event.request_id)
            if event.provider_request_id is not None:
                span.set_attribute("approval_guard.provider_request_id", event.provider_request_id)
        elif isinstance(event, StillWaiting):
            attributes["approval_guard.seconds_left"] = round(event.seconds_left, 3)
            if event.approvals is not None:
                attributes["approval_guard.approvals"] = event.approvals
        elif isinstance(event, Decided):
            attributes["approval_guard.status"] = event.status
            if event.decided_by is not None:
                attributes["approval_guard.decided_by"] = event.decided_by
            # API 1.3: what decided at create time, on the span too (it is one per call).
            for key, value in (
                ("approval_guard.grant_id", event.grant_id),
                ("approval_guard.granted_by", event.granted_by),
                ("approval_guard.rule", event.rule),
            ):
                if value is not None:
                    attributes[key] = value
                    span.set_attribute(key, value)
        elif isinstance(event, ArgumentsEdited):
            # Which names changed, never their values.
            attributes["approval_guard.changed"] = list(event.changed)
        elif isinstance(event, ToolStarted):
            self._waited = self._monotonic() - self._clock_start
        elif isinstance(event, ToolFinished) and event.error is not None:
            attributes["approval_guard.error"] = event.error
        elif isinstance(event, CallNotRun) and event.not_run.request_id is not None:
            span.set_attribute("approval_guard.request_id", event.not_run.request_id)
        span.add_event(f"approval_guard.{_EVENT_NAMES[type(event)]}", attributes)

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        """``outcome``: "ran", "skipped" or a Reason's value; ``error``: the tool's exception."""
        self.ended = True
        trace = _trace
        span = self._span
        waited = self._waited if self._waited is not None else self._monotonic() - self._clock_start
        span.set_attribute("approval_guard.outcome", outcome)
        span.set_attribute("approval_guard.seconds_waited", round(waited, 6))
        if error is not None:
            span.set_attribute("approval_guard.error", type(error).__name__)
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
        span.end()


class call_span:  # named as the function it was: ``with call_span(...) as span``
    """The call's span, current inside the block; None (and nothing done) without the extra.

    A class rather than a generator: it is entered on every guarded call.
    """

    __slots__ = ("_call", "_monotonic", "_tool", "_use")

    def __init__(self, tool: str, monotonic: Any) -> None:
        self._tool = tool
        self._monotonic = monotonic
        self._call: CallSpan | None = None
        self._use: Any = None

    def __enter__(self) -> CallSpan | None:
        trace = _api()
        if trace is None:
            return None
        try:
            if _proxy is not None and isinstance(trace.get_tracer_provider(), _proxy):
                # No provider was ever set (API only, no SDK): the span would be a no-op
                # span dropped at once, so none is started (one is, once a provider is set).
                return None
            span = _tracer.start_span(SPAN_NAME, attributes={"approval_guard.tool": self._tool})
        except Exception:
            log.warning("could not start an OpenTelemetry span", exc_info=True)
            return None
        if not span.is_recording():
            # No SDK (or a sampler said no): nothing would be kept, so nothing more is done.
            span.end()
            return None
        # The exception is not recorded by use_span: a NotRun is not an error, and a
        # tool's own exception is recorded by end().
        use = trace.use_span(
            span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )
        use.__enter__()
        self._use = use
        self._call = call = CallSpan(span, self._monotonic)
        return call

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        use = self._use
        if use is None:
            return False
        self._use = None
        call = self._call
        if exc is not None and call is not None and not call.ended:
            # Raised before the call could end it (arguments that cannot be sent):
            # a span never ended is never exported, and the call would vanish from traces.
            with contextlib.suppress(Exception):
                call.end("raised", exc)
        return bool(use.__exit__(kind, exc, tb))
