"""One call's plan: its arguments and request body, its deadlines, the timeout clamp.

Everything here is decided before any HTTP, and depends only on the call and the
configuration, never on time already spent: a harness that replays an
idempotency key after a crash sends the same bytes.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from typing import Any

import attrs

from approval_guard._call.ops import CallPlan
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._codec.clock import Clock
from approval_guard._codec.display import markers_at
from approval_guard._codec.duration import format_duration
from approval_guard._codec.marker import REDACTED_KEY, holds_marker_key
from approval_guard._codec.serialize import dumps, to_json_value
from approval_guard._codec.wire import MAX_CONTEXT
from approval_guard._options.advice import advice_for
from approval_guard._options.redact import RedactionFailed, redact
from approval_guard._options.spec import ToolSpec

log = logging.getLogger("approval_guard")


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
    batch: str | None = None,
    context: str | None = None,
) -> CallPlan | NotRun:
    """One call's plan: its arguments, its request body, its deadlines.

    A NotRun when what would be sent cannot be trusted: an argument holds a
    redaction marker's key, or the ``redact`` callable failed. Nothing is sent then.
    ``started``: when the guarded call began (monotonic), if before now (a ``when``
    ran first): the harness's limit counts from then. ``requested_by``: the person
    the call is made for (checked already), sent as API 1.1's create field.
    ``batch`` and ``context`` (checked already): API 1.3's create fields, sent only
    when given (``context`` cut to :data:`MAX_CONTEXT` characters, see :func:`fit_context`).
    """
    if bound is None:
        bound = spec.bind(args, kwargs)
    # to_json_value builds fresh plain-JSON containers, so no JSON round trip is needed.
    real = to_json_value(bound)
    if holds_marker_key(real):
        # It would show as a hidden secret on the review page, and the reviewer
        # would approve a value they never saw. The NotRun shows no value: the
        # unredacted ones may hold a secret.
        return refused(
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
            return refused(
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
    mutable = False
    for value in bound.values():
        if type(value) not in _IMMUTABLE:
            mutable = True
            break
    limit = limit if limit is not None else settings.harness_limit
    timeout = requested_timeout(
        spec.timeout, limit, settings.return_margin + settings.deadline_margin
    )
    if 1 <= timeout < spec.timeout:
        describe_clamp(spec.name, spec.timeout, timeout)
    # The body depends only on the call and the configuration, never on time
    # already spent: a harness that replays the key after a crash must send
    # the same bytes, or the provider rejects it as a different request.
    arguments_json = dumps(arguments)
    if context is not None:
        context = fit_context(context)
    # API 1.3: where the markers are, so a provider shows only these as redactions.
    # (Every marker is the guard's: arguments holding one were refused above.)
    places = markers_at(arguments) if how is not None else []
    if batch is None and context is None and not places:  # most calls: the kept tail
        body = (
            b'{"arguments":'
            + arguments_json
            + _body_tail(spec.name, timeout, editable, requested_by)
        )
    else:
        body = _body(
            arguments_json,
            spec.name,
            timeout,
            editable,
            requested_by,
            batch=batch,
            context=context,
            places=places,
        )
    if started is None:
        started = clock.monotonic()

    return CallPlan(
        tool=spec.name,
        arguments=arguments,
        body=body,
        idempotency_key=idempotency_key or new_idempotency_key(),
        timeout=timeout,
        started=started,
        local_end=started + limit - settings.return_margin,
        harness_end=started + limit,
        deadline_margin=settings.deadline_margin,
        poll_wait=settings.poll_wait,
        worker=worker,
        current_arguments=_rereader(spec, args, kwargs, redaction_key) if mutable else None,
        editable=editable,
        converters=spec.converters,
        check_edit=spec.check_edit,
        redacted=how is not None,
        messages=spec.messages,
        requested_by=requested_by,
        arguments_json=arguments_json,
        batch=batch,
        context=context,
        sends_redacted=bool(places),
    )


def with_context(plan: CallPlan, context: str) -> CallPlan:
    """``plan`` sending ``context`` as well (cut to fit): a ``describe=`` sentence."""
    context = fit_context(context)
    arguments_json = plan.arguments_json
    if arguments_json is None:
        arguments_json = dumps(plan.arguments)
    body = _body(
        arguments_json,
        plan.tool,
        plan.timeout,
        plan.editable,
        plan.requested_by,
        batch=plan.batch,
        context=context,
        places=markers_at(plan.arguments) if plan.sends_redacted else [],
    )
    return attrs.evolve(plan, body=body, context=context)


def without_redacted(plan: CallPlan) -> CallPlan:
    """``plan`` sending its create without API 1.3's ``redacted`` (an older provider's 400)."""
    arguments_json = plan.arguments_json
    if arguments_json is None:
        arguments_json = dumps(plan.arguments)
    body = _body(
        arguments_json,
        plan.tool,
        plan.timeout,
        plan.editable,
        plan.requested_by,
        batch=plan.batch,
        context=plan.context,
        places=[],
    )
    return attrs.evolve(plan, body=body, sends_redacted=False)


def _body(
    arguments_json: bytes,
    tool: str,
    timeout: float,
    editable: tuple[str, ...],
    requested_by: str | None,
    *,
    batch: str | None,
    context: str | None,
    places: list[str],
) -> bytes:
    """The create body: a call that uses no 1.3 field sends the bytes a 1.2 provider knows."""
    if batch is None and context is None and not places:
        return b'{"arguments":' + arguments_json + _body_tail(tool, timeout, editable, requested_by)
    rest = body_rest(tool, timeout, editable, requested_by, batch=batch, context=context)
    if places:
        rest["redacted"] = places
    return request_body(arguments_json, rest)


def _rereader(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any], redaction_key: bytes
) -> Callable[[], Any]:
    """The call's arguments made JSON again, as sent (redacted): made only for mutable ones."""
    how = spec.redact

    def current() -> Any:
        again = to_json_value(spec.bind(args, kwargs))
        return again if how is None else redact(again, how, redaction_key)

    return current


def body_rest(
    tool: str,
    timeout: float,
    editable: tuple[str, ...],
    requested_by: str | None,
    *,
    batch: str | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """A create's fields after ``arguments``.

    Each optional field only when given: a call that uses none of them sends the
    bytes an older provider knows (a 1.2 provider refuses a field it does not know).
    """
    rest: dict[str, Any] = {"tool": tool, "timeout": format_duration(timeout)}
    if editable:
        rest["editable"] = list(editable)
    if requested_by is not None:
        rest["requested_by"] = requested_by  # API 1.1; part of the idempotent body
    if batch is not None:
        rest["batch"] = batch  # API 1.3, as is context; both part of the idempotent body
    if context is not None:
        rest["context"] = context
    return rest


#: What ends a ``context`` cut to fit (the reviewer sees that there was more).
CUT_MARK = " [… cut]"


def fit_context(text: str) -> str:
    """``text`` if it fits in :data:`MAX_CONTEXT` characters, else cut to fit, marked.

    The cut is a pure function of the text, so a replayed call sends the same bytes.
    """
    if len(text) <= MAX_CONTEXT:
        return text
    return text[: MAX_CONTEXT - len(CUT_MARK)] + CUT_MARK


#: Bytes after a create's arguments, by what they are written from (see _body_tail).
_TAILS: dict[tuple[str, float, tuple[str, ...], str | None], bytes] = {}
_MAX_TAILS = 1024


def _body_tail(
    tool: str, timeout: float, editable: tuple[str, ...], requested_by: str | None
) -> bytes:
    """``request_body``'s bytes after the arguments: the same for every call of a tool.

    Written once per tool, timeout, editable names and requested_by, and kept
    (at most ``_MAX_TAILS`` of them). Only exact strings are kept: a str subclass
    could compare equal to a name it does not write.
    """
    if (
        type(tool) is not str
        or (requested_by is not None and type(requested_by) is not str)
        or (editable and not all(type(name) is str for name in editable))
    ):
        return _after_arguments(body_rest(tool, timeout, editable, requested_by))
    key = (tool, timeout, editable, requested_by)
    tail = _TAILS.get(key)
    if tail is None:
        tail = _after_arguments(body_rest(tool, timeout, editable, requested_by))
        if len(_TAILS) >= _MAX_TAILS:
            _TAILS.clear()
        _TAILS[key] = tail
    return tail


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def new_idempotency_key() -> str:
    """A random UUID (version 4, as ``str(uuid.uuid4())`` writes it), without the UUID object.

    One ``os.urandom`` read per key, never random bytes read ahead: a process forked
    by C code (uWSGI's workers) runs no ``os.register_at_fork`` hook, and would hand
    out its parent's next key (read ahead, a key was no cheaper: docs/benchmarks.md).
    """
    digits = os.urandom(16).hex()
    return (
        f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-"
        f"{_VARIANT[digits[16]]}{digits[17:20]}-{digits[20:]}"
    )


def request_body(arguments_json: bytes, rest: dict[str, Any]) -> bytes:
    """``dumps({"arguments": ..., **rest})``, reusing the arguments' canonical JSON.

    Canonical JSON sorts its keys and ``"arguments"`` sorts before every other
    field of a create, so it is the first member: the bytes are the same as
    writing the whole payload at once, and the arguments are written only once
    (their digest for the execution record hashes the same bytes).
    """
    return b'{"arguments":' + arguments_json + _after_arguments(rest)


def _after_arguments(rest: dict[str, Any]) -> bytes:
    assert rest and all(key > "arguments" for key in rest)
    return b"," + dumps(rest)[1:]


def refused(spec: ToolSpec, arguments: dict[str, Any], message: str) -> NotRun:
    """Nothing was sent for approval: ``message`` says why (``arguments``: never unredacted)."""
    return NotRun(
        reason=Reason.NOT_OBTAINED,
        message=message,
        tool=spec.name,
        arguments=arguments,
        advice=advice_for(Reason.NOT_OBTAINED, spec.messages, refused=True),
    )
