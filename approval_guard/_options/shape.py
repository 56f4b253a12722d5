"""A tool's shape: its arguments' names, how a call binds them, how an edit of one converts.

However a tool is described, the guard needs the same three things of it, and
:func:`~approval_guard._options.spec.build_spec` (the one builder of a
:class:`~approval_guard._options.spec.ToolSpec`) checks every option against
them once:

- :func:`from_signature`: a decorated Python function. Its parameters, bound
  as Python binds them; parameters a framework injects (by type) left out; an
  edit converted to the parameter's annotation.
- :func:`from_names`: a tool a framework hands over as a name and a dict of
  arguments its own schema declares (a Pydantic AI toolset's tool, a LangChain
  tool in a middleware). Arguments by name only; an edit is plain JSON, which
  the framework's own validator checks (``check_edit``).
- :func:`from_schema`: a tool known only by a JSON schema (an MCP tool's
  ``inputSchema``, relayed by ``approval-guard mcp-proxy``). Arguments by name
  only, any name; an edit converted by the property's schema.
- :func:`unknown_tool`: options checked before the tool is known (a decorator's
  arguments, a framework's table of tools): names are not checked yet.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs

from approval_guard._codec.serialize import Binder, binder
from approval_guard._options.convert import editable_converters
from approval_guard._options.converters import Converter, clip, entry
from approval_guard._options.inject import injected_parameters
from approval_guard._options.schema import schema_converter
from approval_guard.exceptions import ConfigurationError


@attrs.frozen
class ToolShape:
    """What the guard knows of a tool's arguments (make one with the functions below)."""

    fn: Callable[..., Any]
    signature: inspect.Signature
    #: The argument names; None while the tool is not known (nothing is checked against them).
    names: frozenset[str] | None
    #: How a missing name is described: "a parameter of f", "a property of the input schema of t".
    noun: str
    #: The converter of an edit of one argument (ConfigurationError if none can be built).
    converter: Callable[[str], Converter]
    #: Parameters a framework fills in itself: never sent for approval.
    injected: frozenset[str] = frozenset()
    #: Called as ``fn(**arguments)`` with any names: no signature binds the call.
    by_name: bool = False

    def binder(self, exclude: frozenset[str], tool: str) -> Binder:
        """How a call's ``(args, kwargs)`` become the arguments sent (``exclude`` left out)."""
        if not self.by_name:
            return binder(self.signature, exclude=exclude)

        def by_name(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            if args:
                raise TypeError(f"{tool} takes its arguments by name only")
            return {key: value for key, value in kwargs.items() if key not in exclude}

        return by_name


def from_signature(fn: Callable[..., Any]) -> ToolShape:
    """A Python function's shape: its signature, its injected parameters, its annotations."""
    if not callable(fn):
        raise TypeError(f"requires_approval decorates a function, not {type(fn).__name__}")
    signature = inspect.signature(fn)

    def converter(name: str) -> Converter:
        return editable_converters(fn, signature, (name,))[name]

    return ToolShape(
        fn=fn,
        signature=signature,
        names=frozenset(signature.parameters),
        noun=f"a parameter of {_describe(fn)}",
        converter=converter,
        injected=injected_parameters(fn, signature),
    )


def _as_sent(value: Any, path: str) -> Any:
    """An edit's JSON as it came (already checked plain): the framework's schema converts it."""
    return value


def from_names(fn: Callable[..., Any], tool: str, names: Collection[str]) -> ToolShape:
    """A tool known by its arguments' names (a framework's schema): ``fn(**arguments)``."""
    return ToolShape(
        fn=fn,
        signature=inspect.signature(fn),
        names=frozenset(names),
        noun=f"an argument of {tool}",
        converter=lambda name: entry(name, _as_sent),
        by_name=True,
    )


def from_schema(fn: Callable[..., Any], tool: str, input_schema: object) -> ToolShape:
    """A tool known by a JSON schema: ``fn(**arguments)``, an async function; edits by type."""
    if not inspect.iscoroutinefunction(fn):
        raise ConfigurationError("a schema tool's call must be an async function")
    if not isinstance(input_schema, Mapping):
        raise ConfigurationError(f"the input schema of {clip(repr(tool), 60)} is not an object")
    properties = input_schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise ConfigurationError(f"the input schema of {clip(repr(tool), 60)} has bad properties")
    return ToolShape(
        fn=fn,
        signature=inspect.signature(fn),
        names=frozenset(name for name in properties if isinstance(name, str)),
        noun=f"a property of the input schema of {clip(repr(tool), 60)}",
        converter=lambda name: schema_converter(name, properties[name]),
        by_name=True,
    )


async def _probe(**arguments: Any) -> None:
    """Stands in for a tool not known yet."""


def unknown_tool() -> ToolShape:
    """No tool yet: options are checked, names are not (checked again when the tool is known)."""
    return ToolShape(
        fn=_probe,
        signature=inspect.signature(_probe),
        names=None,
        noun="an argument",
        converter=lambda name: entry(name, _as_sent),
        by_name=True,
    )


def _describe(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
