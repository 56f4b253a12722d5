"""Planning a guarded call: checked options, the timeout clamp, the provider's scope, the plan.

Everything here is decided before any HTTP: a tool's options are checked when
the decorator is applied (:func:`build_spec`, the one builder, whatever the
tool's shape), and each call's :class:`CallPlan`
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
from approval_guard._codec.serialize import Binder
from approval_guard._codec.wire import MAX_BATCH, MAX_REQUESTED_BY
from approval_guard._options.advice import check_messages
from approval_guard._options.converters import Converter, clip
from approval_guard._options.options import DEFAULT_TIMEOUT, ApprovalOptions, check_names
from approval_guard._options.redact import Paths, RedactFn, check_redact, redacted_names
from approval_guard._options.shape import ToolShape
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
    #: Every option as given (checked): one added to ``ApprovalOptions`` reaches every spec.
    options: Mapping[str, Any] = attrs.field(factory=dict)

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


def _names(value: object, option: str) -> tuple[str, ...]:
    """An option that lists argument names: sorted, each once; else ConfigurationError."""
    if isinstance(value, (str, bytes)):
        raise ConfigurationError(
            f"{option} must be a collection of parameter names, not a string; "
            f"write {option}=('name',)"
        )
    try:
        names: tuple[object, ...] = tuple(value)  # type: ignore[arg-type]
    except TypeError:  # not iterable
        raise ConfigurationError(f"{option} must be a collection of parameter names") from None
    if not all(isinstance(name, str) and name for name in names):
        raise ConfigurationError(f"{option} must be a collection of parameter names (strings)")
    return tuple(sorted(set(names)))  # type: ignore[arg-type]


def build_spec(
    shape: ToolShape,
    *,
    options: ApprovalOptions | Mapping[str, Any],
    on_not_run: Callable[[NotRun], Any] | None = None,
    check_edit: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
    name: str | None = None,
) -> ToolSpec:
    """The one builder of a tool's spec: every option checked once, against the tool's shape.

    ``shape`` says what the tool's arguments are (a signature, a list of names, a
    JSON schema: see :mod:`approval_guard._options.shape`); ``options`` are all of
    ``requires_approval``'s (an unknown one is a ``TypeError``, a bad one a
    ConfigurationError, now rather than on the first call), kept whole on the
    spec. ``name``: the tool's name when ``options`` give none (default: the
    function's). ``check_edit``: a framework's check of a whole edited call.
    """
    check_names(options)
    timeout = options.get("timeout", DEFAULT_TIMEOUT)
    tool = options.get("tool")
    if on_not_run is not None and not callable(on_not_run):
        raise ConfigurationError("on_not_run must be a callable taking a NotRun, such as str")
    seconds = seconds_option(timeout, "timeout")
    if seconds != int(seconds) or not 1 <= seconds <= MAX_TIMEOUT:
        raise ConfigurationError(
            f"timeout must be whole seconds between 1s and 24h, got {timeout!r}"
        )
    label = tool if tool is not None else (name or getattr(shape.fn, "__name__", None))
    if not isinstance(label, str) or not 1 <= len(label) <= 200:
        raise ConfigurationError("tool must be a name of 1 to 200 characters")
    known = shape.names
    exclude = frozenset(_names(options.get("exclude", ()), "exclude"))
    unknown = sorted(exclude - known) if known is not None else []
    if unknown:
        raise ConfigurationError(f"exclude names parameters that {label} does not have: {unknown}")
    is_async = inspect.iscoroutinefunction(shape.fn)
    when = options.get("when")
    when_async = check_when(when, is_async=is_async)
    describe = options.get("describe")
    describe_async = check_describe(describe, is_async=is_async)
    # Parameters a framework fills in (a run context, a config) are never the
    # model's arguments: recognised by type, they are left out like `exclude`.
    left_out = exclude | shape.injected
    redaction = check_redact(options.get("redact"), known, left_out, label)
    editable = _names(options.get("editable", ()), "editable")
    for arg in editable:
        if known is not None and arg not in known:
            raise ConfigurationError(
                f"editable names {clip(repr(arg), 60)}, which is not {shape.noun}"
            )
        if arg in left_out:
            raise ConfigurationError(
                f"editable names {arg!r}, which is excluded and never sent for approval"
            )
    both = sorted(set(editable) & redacted_names(redaction))
    if both:
        raise ConfigurationError(
            f"{both[0]!r} of {label} is both redacted and editable: a reviewer cannot edit "
            "a value they cannot see"
        )
    converters = {arg: shape.converter(arg) for arg in editable} if known is not None else {}
    return ToolSpec(
        fn=shape.fn,
        name=label,
        timeout=seconds,
        exclude=left_out,
        signature=shape.signature,
        is_async=is_async,
        bind=shape.binder(left_out, label),
        on_not_run=on_not_run,
        when=when,
        when_async=when_async,
        describe=describe,
        describe_async=describe_async,
        redact=redaction,
        editable=editable,
        converters=converters,
        check_edit=check_edit,
        on_event=check_on_event(options.get("on_event")),
        messages=check_messages(options.get("messages")),
        by_name=shape.by_name,
        options=dict(options),
    )
