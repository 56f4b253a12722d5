"""Planning a guarded call: checked options, the timeout clamp, the provider's scope, the plan.

Everything here is decided before any HTTP: a tool's options are checked when
the decorator is applied (:func:`make_spec`), and each call's :class:`CallPlan`
depends only on the call and the configuration, never on time already spent.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from approval_guard._call.events import OnEvent, check_on_event
from approval_guard._call.ops import Ran
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._codec.display import is_hidden
from approval_guard._codec.duration import DurationLike, to_seconds
from approval_guard._codec.serialize import Binder, binder
from approval_guard._codec.wire import MAX_BATCH, MAX_REQUESTED_BY
from approval_guard._options.advice import check_messages
from approval_guard._options.convert import editable_converters
from approval_guard._options.converters import Converter
from approval_guard._options.inject import injected_parameters
from approval_guard._options.options import DEFAULT_TIMEOUT, ApprovalOptions
from approval_guard._options.redact import Paths, RedactFn, check_redact, redacted_names
from approval_guard._options.when import check_of_arguments, check_when
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
    return _check_label(value, name, MAX_REQUESTED_BY)


def check_batch(value: object, name: str = "batch") -> str:
    """A batch id (API 1.3, one turn's calls): 1 to 200 printable characters, none hidden.

    A reviewer's page groups requests by it: two ids that look alike must be equal.
    """
    return _check_label(value, name, MAX_BATCH)


def _check_label(value: object, name: str, limit: int) -> str:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= limit
        or value != value.strip()
        or any(is_hidden(char) for char in value)
    ):
        raise ConfigurationError(
            f"{name} must be a string of 1 to {limit} printable characters "
            "(no control or invisible characters, no space at either end)"
        )
    return value


def context_problem(value: object) -> str | None:
    """Why ``value`` cannot be sent as a ``context`` (API 1.3), or None if it can.

    Any text with something to read in it; a longer one than the API allows is
    cut to fit when sent (``_call/plan.py``'s ``fit_context``), never refused.
    """
    if not isinstance(value, str):
        return f"not a string but a {type(value).__name__}"
    if not value.strip():
        return "an empty sentence"
    try:
        value.encode()
    except UnicodeEncodeError:
        return "not valid Unicode (it holds a lone surrogate)"
    return None


def check_reason(value: object, name: str = "reason") -> str:
    """A stated reason for a call (sent as ``context``); a bad one raises ConfigurationError."""
    problem = context_problem(value)
    if problem is not None:
        raise ConfigurationError(
            f"{name} must be a sentence (a non-empty string of valid Unicode), got {problem}"
        )
    assert isinstance(value, str)
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
    #: The sentence sent as the request's context, from the arguments as sent; None: none.
    describe: Callable[[Mapping[str, Any]], Any] | None = None
    describe_async: bool = False
    redact: Paths | RedactFn | None = None
    editable: tuple[str, ...] = ()
    converters: Mapping[str, Converter] = attrs.field(factory=dict)
    #: A framework's check of a whole edited call (see ``CallPlan.check_edit``).
    check_edit: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None
    on_event: OnEvent | None = None
    messages: Mapping[Reason, str] = attrs.field(factory=dict)
    #: Called as ``fn(**arguments)`` with the arguments as sent, any names (a tool known only
    #: by a JSON schema, see ``_options/schema.py``): edits replace keywords, no signature.
    by_name: bool = False

    def result(self, outcome: Ran | NotRun) -> Any:
        if isinstance(outcome, Ran):
            return outcome.value
        return outcome if self.on_not_run is None else self.on_not_run(outcome)


def check_describe(describe: object, *, is_async: bool) -> bool:
    """``describe`` checked at decoration: a callable of one argument. True if it is async."""
    return check_of_arguments(
        describe,
        option="describe",
        returns="a sentence (str)",
        is_async=is_async,
        name="the arguments as sent",
    )


def make_spec(
    fn: Callable[..., Any],
    *,
    on_not_run: Callable[[NotRun], Any] | None = None,
    options: ApprovalOptions,
) -> ToolSpec:
    """Check a tool's options; a bad one raises ConfigurationError now, not on the first call."""
    timeout = options.get("timeout", DEFAULT_TIMEOUT)
    tool = options.get("tool")
    exclude = options.get("exclude", ())
    when = options.get("when")
    describe = options.get("describe")
    redact = options.get("redact")
    editable = options.get("editable", ())
    on_event = options.get("on_event")
    messages = options.get("messages")
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
    describe_async = check_describe(describe, is_async=is_async)
    # Parameters a framework fills in (a run context, a config) are never the
    # model's arguments: recognised by type, they are left out like `exclude`.
    left_out = frozenset(exclude) | injected_parameters(fn, signature)
    redaction = check_redact(redact, signature.parameters, left_out, name)
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
        describe=describe,
        describe_async=describe_async,
        redact=redaction,
        editable=editable_names,
        converters=converters,
        on_event=check_on_event(on_event),
        messages=check_messages(messages),
    )
