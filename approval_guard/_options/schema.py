"""An edit of a JSON schema's property (an MCP tool's ``inputSchema``), converted by its type.

A tool that only exists as a name and a JSON schema (a tool of another MCP
server, relayed by ``approval-guard mcp-proxy``) has no annotations: an edit
is converted by the property's schema, as strictly as an annotation's
(:mod:`approval_guard._options.convert`). Its shape is
:func:`approval_guard._options.shape.from_schema`; a property whose schema no
edit can be converted to is a ConfigurationError when the tool is guarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from approval_guard._codec.serialize import same_json
from approval_guard._options.converters import (
    SIMPLE,
    Converter,
    EditError,
    Inner,
    Unsupported,
    bare,
    clip,
    dict_of,
    entry,
    list_of,
    optional,
)
from approval_guard.exceptions import ConfigurationError

__all__ = ["schema_converter"]

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


def schema_converter(name: str, schema: Any) -> Converter:
    """The strict converter of an edit of property ``name`` to what ``schema`` says, or an error.

    The result is plain JSON again (an ``int`` for ``integer``, a ``float`` for
    ``number``...), so it can be passed on to the tool as it is.
    """
    try:
        inner = _build(schema)
    except Unsupported:
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
        raise Unsupported()
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
            raise Unsupported()  # ["string", "integer"]: which one an edit means is a guess
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
    raise Unsupported()


def _nullable(choices: Any) -> Inner:
    """``anyOf: [X, {"type": "null"}]`` (how pydantic writes ``X | None``): optional X."""
    if not isinstance(choices, list):
        raise Unsupported()
    others = [c for c in choices if not (isinstance(c, Mapping) and c.get("type") == "null")]
    if len(others) != 1 or len(others) == len(choices):
        raise Unsupported()
    return optional(_build(others[0]))


def _enum(values: Any, typed: Inner | None) -> Inner:
    if not isinstance(values, list) or not values:
        raise Unsupported()
    allowed = list(values)

    def convert(value: Any, path: str) -> Any:
        found = [item for item in allowed if same_json(item, value)]
        if len(found) != 1:
            raise EditError(f"the edit of {clip(path, 80)} is not one of the values it may take")
        return found[0] if typed is None else typed(found[0], path)

    return convert
