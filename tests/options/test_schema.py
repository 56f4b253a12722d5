"""A spec from a JSON schema (an MCP tool's inputSchema): its checks, edit conversion, calls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._call.edit import edited
from approval_guard._call.ops import Invoke
from approval_guard._codec.exact_json import JSONNumber
from approval_guard._options.converters import EditError
from approval_guard._options.schema import schema_converter
from approval_guard._options.shape import from_schema
from approval_guard._options.spec import ToolSpec, build_spec
from approval_guard.exceptions import ConfigurationError
from approval_guard.testing import LocalProvider

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "copies": {"type": "integer"},
        "from": {"type": "number"},  # not a Python name: a schema's properties may be anything
        "my-tags": {"type": "array", "items": {"type": "string"}},
        "free": {},
    },
}


def schema_spec(name: str, schema: Any, call: Any, **options: Any) -> ToolSpec:
    """A schema tool's spec, as the proxy builds it: the one builder, over the schema's shape."""
    return build_spec(from_schema(call, name, schema), options=options, name=name)


async def _forward(**arguments: Any) -> dict[str, Any]:
    return arguments


@pytest.mark.parametrize(
    ("schema", "edit", "expected"),
    [
        ({"type": "integer"}, 3, 3),
        ({"type": "number"}, 3, 3.0),
        ({"type": "number"}, JSONNumber("2.5"), 2.5),
        ({"type": "string"}, "x", "x"),
        ({"type": "boolean"}, False, False),
        ({"type": "array", "items": {"type": "integer"}}, [1, 2], [1, 2]),
        ({"type": "array"}, [1, "a"], [1, "a"]),
        ({"type": "object"}, {"a": [1]}, {"a": [1]}),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": 1}, {"a": 1}),
        ({"type": ["string", "null"]}, None, None),
        ({"type": ["string"]}, "x", "x"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, 4, 4),
        ({"enum": ["fast", "slow"]}, "slow", "slow"),
        ({"type": "integer", "enum": [1, 2]}, 2, 2),
    ],
)
def test_an_edit_converts_to_what_the_schema_says(schema: Any, edit: Any, expected: Any) -> None:
    """integer, number (to float), string, boolean, arrays, objects, nullable and enum schemas."""
    value = schema_converter("arg", schema)(edit)
    assert expected == value
    assert type(expected) is type(value)


@pytest.mark.parametrize(
    ("schema", "edit"),
    [
        ({"type": "integer"}, "3"),
        ({"type": "integer"}, 3.0),
        ({"type": "string"}, 3),
        ({"type": "boolean"}, 1),
        ({"type": "array", "items": {"type": "integer"}}, [1, "2"]),
        ({"type": "object"}, [1]),
        ({"type": "string"}, None),
        ({"enum": ["fast", "slow"]}, "medium"),
        ({"type": "integer", "enum": [1, 2]}, 3),
        ({"type": "string"}, {"$redacted": "0123456789ab"}),
    ],
)
def test_an_edit_of_another_type_is_refused(schema: Any, edit: Any) -> None:
    """A value the schema does not allow is an EditError: the tool does not run."""
    with pytest.raises(EditError):
        schema_converter("arg", schema)(edit)


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": ["string", "integer"]},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"$ref": "#/$defs/Thing"},
        {"type": "array", "items": {"type": "mystery"}},
        {"enum": []},
        "string",
    ],
)
def test_a_schema_no_edit_can_be_converted_to_is_refused(schema: Any) -> None:
    """No type, a choice of types, a $ref: editable is refused when the spec is made."""
    with pytest.raises(ConfigurationError, match="which an edit cannot be converted to"):
        schema_converter("arg", schema)


def test_editable_must_be_a_property_of_the_schema() -> None:
    """An editable name the schema does not list is refused."""
    with pytest.raises(ConfigurationError, match="not a property of the input schema"):
        schema_spec("write", SCHEMA, _forward, editable=("colour",))


def test_redact_must_start_at_a_property_and_never_be_editable() -> None:
    """Redaction paths start at a listed property; a redacted property cannot be editable."""
    with pytest.raises(ConfigurationError, match="has no parameter 'secret'"):
        schema_spec("write", SCHEMA, _forward, redact=("secret",))
    with pytest.raises(ConfigurationError, match="both redacted and editable"):
        schema_spec("write", SCHEMA, _forward, redact=("path",), editable=("path",))


def test_the_call_must_be_async() -> None:
    """A schema tool's call is an async function (the proxy's forwarding)."""
    with pytest.raises(ConfigurationError, match="async function"):
        schema_spec("write", SCHEMA, lambda **arguments: arguments)


def test_the_spec_binds_any_property_name_and_applies_edits_by_name() -> None:
    """Arguments are keywords of any name ("from", "my-tags"); an edit replaces its keyword."""
    spec = schema_spec("write", SCHEMA, _forward, editable=("from",))
    arguments = {"path": "a", "from": 1.5, "my-tags": ["x"]}
    assert arguments == spec.bind((), arguments)
    with pytest.raises(TypeError):
        spec.bind(("a",), {})
    op = Invoke(edits={"from": 2.0})
    assert ((), {**arguments, "from": 2.0}) == edited(spec, (), arguments, op)


def test_a_guarded_schema_call_sends_the_arguments_as_they_are(provider: LocalProvider) -> None:
    """Through a real Guard and provider: the request's arguments are the dict; approved, runs."""

    def approve_edited(provider: LocalProvider, request: Any) -> None:
        provider.approve(request.id, arguments={**request.arguments, "copies": 5})

    provider.policy = approve_edited
    ran: list[dict[str, Any]] = []

    async def forward(**arguments: Any) -> str:
        ran.append(arguments)
        return "done"

    spec = schema_spec("write-file", SCHEMA, forward, timeout="1m", editable=("copies",))
    arguments = {"path": "a", "copies": 1, "from": 0.5}
    with ag.Guard(base_url=provider.url, credential=provider.credential) as guard:
        out = asyncio.run(guard._call_async(spec, (), dict(arguments)))
    assert "done" == out
    assert [{**arguments, "copies": 5}] == ran
    [request] = provider.requests()
    assert ("write-file", arguments, ["copies"]) == (
        request.tool,
        request.arguments,
        list(request.editable or ()),
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "$ref": "#/$defs/Mode"},
        {"type": "integer", "allOf": [{"$ref": "#/$defs/Small"}]},
        {"type": "string", "not": {"const": "/"}},
        {"type": ["string", "null"], "if": {"type": "string"}, "then": {"minLength": 1}},
        {"type": "array", "items": {"type": "string", "$ref": "#/$defs/Name"}},
        {"anyOf": [{"type": "integer", "$ref": "#/$defs/Small"}, {"type": "null"}]},
    ],
)
def test_a_type_beside_a_reference_or_combinator_is_refused(schema: Any) -> None:
    """A type next to $ref, allOf, not or if says less than the schema: editable is refused."""
    with pytest.raises(ConfigurationError, match="which an edit cannot be converted to"):
        schema_converter("arg", schema)
