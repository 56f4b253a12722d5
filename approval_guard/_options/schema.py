"""A tool described by a JSON schema (an MCP tool's ``inputSchema``), as a spec the guard can call.

A Python tool's spec comes from its signature (:func:`~._options.spec.make_spec`).
A tool that only exists as a name and a JSON schema (a tool of another MCP
server, relayed by ``approval-guard mcp-proxy``) has no signature: its
arguments are a JSON object, sent for approval as they are, and passed on as
keywords (``call(**arguments)``, any property name allowed). Edits are
converted by the schema's types, as strictly as an annotation's::

    spec = schema_spec(
        "write_file",
        {"type": "object", "properties": {"path": {"type": "string"},
                                          "copies": {"type": "integer"}}},
        call=forward,                 # async def forward(**arguments) -> result
        timeout="10m",
        editable=("copies",),
    )

A bad option (an editable property the schema does not list, or one whose
type no edit can be converted to) raises ConfigurationError here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from approval_guard._call.outcome import NotRun, Reason
from approval_guard._codec.duration import DurationLike
from approval_guard._codec.serialize import same_json
from approval_guard._options.converters import (
    SIMPLE,
    Converter,
    EditError,
    Inner,
    bare,
    clip,
    dict_of,
    entry,
    list_of,
    optional,
)
from approval_guard._options.options import ApprovalOptions
from approval_guard._options.redact import check_redact, redacted_names
from approval_guard._options.spec import ToolSpec, make_spec
from approval_guard.exceptions import ConfigurationError

__all__ = ["schema_converter", "schema_spec"]

_TYPES: dict[str, Inner] = {
    "integer": SIMPLE[int],
    "number": SIMPLE[float],
    "string": SIMPLE[str],
    "boolean": SIMPLE[bool],
}

_SUPPORTED = (
    'a "type" of integer, number, string, boolean, array (of one item schema) or object, '
    'optionally with null, or an "enum" of JSON values; no "$ref", "allOf", "not" or "if"'
)


class _Unsupported(Exception):
    """A schema (or a piece of one) no converter is built for."""


def schema_spec(
    name: str,
    input_schema: Mapping[str, Any],
    call: Callable[..., Any],
    *,
    timeout: DurationLike = "30m",
    editable: Collection[str] = (),
    redact: Collection[str] | None = None,
    on_event: Callable[[Any], object] | None = None,
    on_not_run: Callable[[NotRun], Any] | None = None,
    messages: Mapping[Reason, str] | None = None,
) -> ToolSpec:
    """The spec of tool ``name``, whose arguments are described by ``input_schema``.

    ``call`` is an ``async def`` taking the arguments as keywords; a guarded
    call of the spec is given them as ``kwargs`` (no positional arguments).
    ``redact`` takes dotted paths whose first name is a property of the
    schema; ``editable`` names properties whose schema says how to convert an
    edit. Everything else is checked as ``requires_approval`` checks it.
    """
    if not inspect.iscoroutinefunction(call):
        raise ConfigurationError("a schema tool's call must be an async function")
    if not isinstance(input_schema, Mapping):
        raise ConfigurationError(f"the input schema of {clip(repr(name), 60)} is not an object")
    properties = input_schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise ConfigurationError(f"the input schema of {clip(repr(name), 60)} has bad properties")
    options: ApprovalOptions = {
        "timeout": timeout,
        "tool": name,
        "on_event": on_event,
        "messages": messages,
    }
    # The common checks (timeout, name, on_not_run, on_event, messages) are make_spec's own.
    base = make_spec(call, on_not_run=on_not_run, options=options)
    if isinstance(editable, str) or isinstance(redact, str):
        raise ConfigurationError("redact and editable must be collections of names, not a string")
    names = sorted(set(editable))
    # Redaction paths start at a property: checked against a stand-in signature of them.
    redaction = None
    if redact is not None:
        redaction = check_redact(tuple(redact), tuple(properties), (), name)
    both = sorted(set(names) & redacted_names(redaction))
    if both:
        raise ConfigurationError(
            f"{both[0]!r} is both redacted and editable: a reviewer cannot edit a value "
            "they cannot see"
        )
    converters: dict[str, Converter] = {}
    for prop in names:
        if not isinstance(prop, str) or prop not in properties:
            raise ConfigurationError(
                f"editable names {clip(repr(prop), 60)}, which is not a property of the input "
                f"schema of {clip(repr(name), 60)}"
            )
        converters[prop] = schema_converter(prop, properties[prop])

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if args:
            raise TypeError(f"{name} takes its arguments by name only")
        return dict(kwargs)

    return ToolSpec(
        fn=call,
        name=base.name,
        timeout=base.timeout,
        exclude=frozenset(),
        signature=base.signature,
        is_async=True,
        bind=bind,
        on_not_run=base.on_not_run,
        redact=redaction,
        editable=tuple(names),
        converters=converters,
        on_event=base.on_event,
        messages=base.messages,
        by_name=True,
    )


def schema_converter(name: str, schema: Any) -> Converter:
    """The strict converter of an edit of property ``name`` to what ``schema`` says, or an error.

    The result is plain JSON again (an ``int`` for ``integer``, a ``float`` for
    ``number``...), so it can be passed on to the tool as it is.
    """
    try:
        inner = _build(schema)
    except _Unsupported:
        raise ConfigurationError(
            f"editable property {clip(repr(name), 60)} has the schema "
            f"{clip(repr(schema), 80)}, which an edit cannot be converted to (use {_SUPPORTED})"
        ) from None
    return entry(name, inner)


#: Keywords that narrow or replace what a "type" says, which no converter here reads: a
#: schema holding one is refused rather than converted by its "type" alone.
_UNREAD = frozenset(
    {"$ref", "$dynamicRef", "$recursiveRef", "allOf", "not", "if", "then", "else"}
    | {"dependentSchemas", "unevaluatedProperties", "unevaluatedItems"}
)


def _build(schema: Any) -> Inner:
    if not isinstance(schema, Mapping) or not _UNREAD.isdisjoint(schema):
        raise _Unsupported()
    if "enum" in schema:
        return _enum(schema["enum"], _typed(schema) if "type" in schema else None)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _nullable(schema[key])
    return _typed(schema)


def _typed(schema: Mapping[str, Any]) -> Inner:
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise _Unsupported()  # ["string", "integer"]: which one an edit means is a guess
        one = _typed({**schema, "type": others[0]})
        return one if len(others) == len(kind) else optional(one)
    if kind in _TYPES:
        return _TYPES[kind]
    if kind == "array":
        items = schema.get("items")
        return bare(list, "a JSON array") if items is None else list_of(_build(items), list)
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and not schema.get("properties"):
            return dict_of(_build(extra))
        return bare(dict, "a JSON object")
    raise _Unsupported()


def _nullable(choices: Any) -> Inner:
    """``anyOf: [X, {"type": "null"}]`` (how pydantic writes ``X | None``): optional X."""
    if not isinstance(choices, list):
        raise _Unsupported()
    others = [c for c in choices if not (isinstance(c, Mapping) and c.get("type") == "null")]
    if len(others) != 1 or len(others) == len(choices):
        raise _Unsupported()
    return optional(_build(others[0]))


def _enum(values: Any, typed: Inner | None) -> Inner:
    if not isinstance(values, list) or not values:
        raise _Unsupported()
    allowed = list(values)

    def convert(value: Any, path: str) -> Any:
        found = [item for item in allowed if same_json(item, value)]
        if len(found) != 1:
            raise EditError(f"the edit of {clip(path, 80)} is not one of the values it may take")
        return found[0] if typed is None else typed(found[0], path)

    return convert
