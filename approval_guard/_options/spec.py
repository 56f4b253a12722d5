"""Planning a guarded call: checked options, the timeout clamp, the provider's scope, the plan.

Everything here is decided before any HTTP: a tool's options are checked when
the decorator is applied (:func:`make_spec`), and each call's :class:`CallPlan`
depends only on the call and the configuration, never on time already spent.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
import math
import urllib.parse
import uuid
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from typing import Any

import attrs

from approval_guard._call.events import OnEvent, check_on_event
from approval_guard._call.ops import CallPlan, Ran
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._codec.clock import Clock
from approval_guard._codec.display import is_hidden
from approval_guard._codec.duration import DurationLike, format_duration, to_seconds
from approval_guard._codec.serialize import Binder, binder, dumps, to_json_value
from approval_guard._codec.wire import MAX_REQUESTED_BY
from approval_guard._options.advice import advice_for, check_messages
from approval_guard._options.convert import Converter, editable_converters
from approval_guard._options.inject import injected_parameters
from approval_guard._options.redact import (
    REDACTED_KEY,
    Paths,
    RedactFn,
    RedactionFailed,
    check_redact,
    holds_marker_key,
    redact,
    redacted_names,
)
from approval_guard.exceptions import ConfigurationError

log = logging.getLogger("approval_guard")

#: The longest approval window the provider API allows.
MAX_TIMEOUT = 24 * 3600


def seconds_option(value: DurationLike, name: str) -> float:
    """An option's duration in seconds; a bad one raises ConfigurationError."""
    try:
        return to_seconds(value, name=name)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def check_token(value: object, name: str) -> str:
    """A non-empty printable-ASCII token without spaces; the message never shows the value."""
    if not isinstance(value, str) or not value or not all(32 < ord(ch) < 127 for ch in value):
        raise ConfigurationError(
            f"{name} must be a non-empty token of printable ASCII without spaces"
        )
    return value


def check_requested_by(value: object, name: str = "requested_by") -> str:
    """The person a call is made for: 1 to 200 printable characters, none hidden.

    A reviewer reads it, and a provider compares it with a reviewer's name (to
    refuse one's own approval): a control, bidi or zero-width character would
    make two names look alike.
    """
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_REQUESTED_BY
        or value != value.strip()
        or any(is_hidden(char) for char in value)
    ):
        raise ConfigurationError(
            f"{name} must be a string of 1 to {MAX_REQUESTED_BY} printable characters "
            "(no control or invisible characters, no space at either end)"
        )
    return value


def check_key(key: str) -> str:
    """An idempotency key: 1 to 255 printable ASCII characters without spaces."""
    if (
        not isinstance(key, str)
        or not 1 <= len(key) <= 255
        or not all(32 < ord(ch) < 127 for ch in key)
    ):
        raise ConfigurationError(
            "idempotency_key must be 1 to 255 printable ASCII characters without spaces"
        )
    return key


@attrs.frozen
class ToolSpec:
    """A decorated tool's checked options."""

    fn: Callable[..., Any]
    name: str
    timeout: float
    exclude: frozenset[str]
    signature: inspect.Signature
    is_async: bool
    bind: Binder
    on_not_run: Callable[[NotRun], Any] | None = None
    #: Ask only when this returns True (given the bound arguments); None: always ask.
    when: Callable[[Mapping[str, Any]], Any] | None = None
    when_async: bool = False
    redact: Paths | RedactFn | None = None
    editable: tuple[str, ...] = ()
    converters: Mapping[str, Converter] = attrs.field(factory=dict)
    on_event: OnEvent | None = None
    messages: Mapping[Reason, str] = attrs.field(factory=dict)

    def result(self, outcome: Ran | NotRun) -> Any:
        if isinstance(outcome, Ran):
            return outcome.value
        return outcome if self.on_not_run is None else self.on_not_run(outcome)


def make_spec(
    fn: Callable[..., Any],
    *,
    timeout: DurationLike,
    tool: str | None,
    exclude: Collection[str],
    on_not_run: Callable[[NotRun], Any] | None = None,
    when: Callable[..., Any] | None = None,
    redact: Any = None,
    editable: Collection[str] = (),
    on_event: OnEvent | None = None,
    messages: Mapping[Reason, str] | None = None,
) -> ToolSpec:
    """Check a tool's options; a bad one raises ConfigurationError now, not on the first call."""
    if not callable(fn):
        raise TypeError(f"requires_approval decorates a function, not {type(fn).__name__}")
    if on_not_run is not None and not callable(on_not_run):
        raise ConfigurationError("on_not_run must be a callable taking a NotRun, such as str")
    seconds = seconds_option(timeout, "timeout")
    if seconds != int(seconds) or not 1 <= seconds <= MAX_TIMEOUT:
        raise ConfigurationError(
            f"timeout must be whole seconds between 1s and 24h, got {timeout!r}"
        )
    name = tool if tool is not None else getattr(fn, "__name__", None)
    if not isinstance(name, str) or not 1 <= len(name) <= 200:
        raise ConfigurationError("tool must be a name of 1 to 200 characters")
    if isinstance(exclude, str):
        raise ConfigurationError("exclude must be a collection of parameter names, not a string")
    signature = inspect.signature(fn)
    unknown = set(exclude) - set(signature.parameters)
    if unknown:
        raise ConfigurationError(
            f"exclude names parameters that {name} does not have: {sorted(unknown)}"
        )
    is_async = inspect.iscoroutinefunction(fn)
    when_async = check_when(when, is_async=is_async)
    # Parameters a framework fills in (a run context, a config) are never the
    # model's arguments: recognised by type, they are left out like `exclude`.
    left_out = frozenset(exclude) | injected_parameters(fn, signature)
    redaction = check_redact(redact, signature, left_out, name)
    if isinstance(editable, str):
        raise ConfigurationError("editable must be a collection of parameter names, not a string")
    try:
        editable_names = tuple(sorted(set(editable)))
    except TypeError:  # not iterable, unhashable items, or names mixed with non-strings
        raise ConfigurationError(
            "editable must be a collection of parameter names (strings)"
        ) from None
    for param in editable_names:
        if param in left_out:
            raise ConfigurationError(
                f"editable names {param!r}, which is excluded and never sent for approval"
            )
    both = sorted(set(editable_names) & redacted_names(redaction))
    if both:
        raise ConfigurationError(
            f"{both[0]!r} is both redacted and editable: a reviewer cannot edit a value "
            "they cannot see"
        )
    converters = editable_converters(fn, signature, editable_names) if editable_names else {}
    return ToolSpec(
        fn=fn,
        name=name,
        timeout=seconds,
        exclude=left_out,
        signature=signature,
        is_async=is_async,
        bind=binder(signature, exclude=left_out),
        on_not_run=on_not_run,
        when=when,
        when_async=when_async,
        redact=redaction,
        editable=editable_names,
        converters=converters,
        on_event=check_on_event(on_event),
        messages=check_messages(messages),
    )


def check_when(when: object, *, is_async: bool) -> bool:
    """``when`` checked at decoration: a callable of one argument. True if it is async."""
    if when is None:
        return False
    if not callable(when):
        raise ConfigurationError(
            "when must be a callable taking the bound arguments and returning a bool"
        )
    try:
        when_signature = inspect.signature(when)
    except (TypeError, ValueError):
        when_signature = None  # a builtin without one: trusted to take one argument
    if when_signature is not None:
        try:
            when_signature.bind({})
        except TypeError:
            raise ConfigurationError(
                "when must take exactly one argument, the bound arguments (a mapping of "
                "parameter name to value)"
            ) from None
    call = getattr(when, "__call__", None)  # noqa: B004 (an object with an async __call__)
    when_async = inspect.iscoroutinefunction(when) or inspect.iscoroutinefunction(call)
    if when_async and not is_async:
        raise ConfigurationError("an async when needs an async tool; use a plain function")
    return when_async


def requested_timeout(tool_timeout: float, limit: float, margins: float) -> float:
    """``min(tool timeout, harness limit - return_margin - deadline_margin)``, whole seconds."""
    return float(math.floor(min(tool_timeout, limit - margins)))


def describe_clamp(tool: str, asked: float, got: float) -> None:
    log.warning(
        "approval timeout for %s clamped from %s to %s to fit the harness's limit",
        tool,
        format_duration(asked),
        format_duration(got),
    )


def provider_scope(base_url: str) -> str:
    """The provider's identity in the execution record: scheme, host and port, then the path."""
    parts = urllib.parse.urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    # One host, one spelling: no trailing dot (an absolute DNS name), an address in its
    # canonical form (``[0:0:0:0:0:0:0:1]`` is ``[::1]``), so one provider is one scope.
    host = (parts.hostname or "").lower().rstrip(".")
    with suppress(ValueError):
        host = ipaddress.ip_address(host).compressed
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}:{port}{parts.path.rstrip('/')}"


@attrs.frozen
class CallSettings:
    """A Guard's time settings that shape every call's plan (seconds)."""

    harness_limit: float
    poll_wait: float
    return_margin: float
    deadline_margin: float


#: Exact types whose values cannot change after the call (subclasses may: not listed).
_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def plan_call(
    spec: ToolSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    bound: dict[str, Any] | None = None,
    idempotency_key: str | None,
    limit: float | None,
    settings: CallSettings,
    clock: Clock,
    worker: str,
    redaction_key: bytes,
    started: float | None = None,
    requested_by: str | None = None,
) -> CallPlan | NotRun:
    """One call's plan: its arguments, its request body, its deadlines.

    A NotRun when what would be sent cannot be trusted: an argument holds a
    redaction marker's key, or the ``redact`` callable failed. Nothing is sent then.
    ``started``: when the guarded call began (monotonic), if before now (a ``when``
    ran first): the harness's limit counts from then. ``requested_by``: the person
    the call is made for (checked already), sent as API 1.1's create field.
    """
    if bound is None:
        bound = spec.bind(args, kwargs)
    # to_json_value builds fresh plain-JSON containers, so no JSON round trip is needed.
    real = to_json_value(bound)
    if holds_marker_key(real):
        # It would show as a hidden secret on the review page, and the reviewer
        # would approve a value they never saw. The NotRun shows no value: the
        # unredacted ones may hold a secret.
        return _refused(
            spec,
            {name: None for name in real},
            f"The call's arguments hold an object with the key {REDACTED_KEY!r}, which a "
            f"reviewer would be shown as a hidden secret, so {spec.name} did not run and "
            "nothing was sent for approval.",
        )
    how = spec.redact
    arguments = real
    if how is not None:
        try:
            arguments = redact(real, how, redaction_key)
        except RedactionFailed as exc:
            log.error("redaction for %s failed: %s", spec.name, exc)
            return _refused(
                spec,
                {name: None for name in real},  # never the unredacted values
                f"The tool's redact function failed ({exc}), so nothing was sent for "
                f"approval and {spec.name} did not run.",
            )
    editable = spec.editable
    if editable and how is not None and callable(how):
        # A redact function may hide what was listed as editable: that stays hidden.
        hidden = tuple(name for name in editable if holds_marker_key(arguments.get(name)))
        if hidden:
            log.warning(
                "%s: %s redacted by the redact function, so not offered for editing",
                spec.name,
                ", ".join(hidden),
            )
            editable = tuple(name for name in editable if name not in hidden)
    # Only a mutable argument can change while the call waits: re-read them then.
    mutable = any(type(value) not in _IMMUTABLE for value in bound.values())
    limit = limit if limit is not None else settings.harness_limit
    timeout = requested_timeout(
        spec.timeout, limit, settings.return_margin + settings.deadline_margin
    )
    if 1 <= timeout < spec.timeout:
        describe_clamp(spec.name, spec.timeout, timeout)
    # The body depends only on the call and the configuration, never on time
    # already spent: a harness that replays the key after a crash must send
    # the same bytes, or the provider rejects it as a different request.
    payload: dict[str, Any] = {
        "tool": spec.name,
        "arguments": arguments,
        "timeout": format_duration(timeout),
    }
    if editable:
        payload["editable"] = list(editable)
    if requested_by is not None:
        payload["requested_by"] = requested_by  # API 1.1; part of the idempotent body
    body = dumps(payload)
    if started is None:
        started = clock.monotonic()

    def current() -> Any:
        again = to_json_value(spec.bind(args, kwargs))
        return again if how is None else redact(again, how, redaction_key)

    return CallPlan(
        tool=spec.name,
        arguments=arguments,
        body=body,
        idempotency_key=idempotency_key or str(uuid.uuid4()),
        timeout=timeout,
        started=started,
        local_end=started + limit - settings.return_margin,
        harness_end=started + limit,
        deadline_margin=settings.deadline_margin,
        poll_wait=settings.poll_wait,
        worker=worker,
        current_arguments=current if mutable else None,
        editable=editable,
        converters=spec.converters,
        redacted=how is not None,
        messages=spec.messages,
        requested_by=requested_by,
    )


def _refused(spec: ToolSpec, arguments: dict[str, Any], message: str) -> NotRun:
    return NotRun(
        reason=Reason.NOT_OBTAINED,
        message=message,
        tool=spec.name,
        arguments=arguments,
        advice=advice_for(Reason.NOT_OBTAINED, spec.messages, refused=True),
    )
