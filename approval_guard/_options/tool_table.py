"""Which tools an integration guards, and with which options: checked once, when it is made.

``tools=["issue_refund"]`` or ``tools={"issue_refund": {"editable": ["amount"]}}``
(``True`` for the shared options, ``False`` for a tool left unguarded). Each
tool's options are the shared ones with its own on top, checked when the
toolset or resolver is made, so a bad option never waits for the first call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from approval_guard._options.shape import unknown_tool
from approval_guard._options.spec import build_spec
from approval_guard.exceptions import ConfigurationError

#: A tool's options, as ``requires_approval`` takes them (``timeout``, ``editable``, ...).
ToolOptions = Mapping[str, Any]


def tool_options(
    tools: Collection[str] | Mapping[str, ToolOptions | bool], shared: ToolOptions
) -> dict[str, dict[str, Any]]:
    """Each guarded tool's name -> its checked options (shared ones overridden by its own)."""
    if isinstance(tools, (str, bytes)):
        raise ConfigurationError(
            "tools must be a collection of tool names or a mapping of name to options, "
            f"not one string; write tools=[{tools!r}]"
        )
    try:
        items = list(tools.items()) if isinstance(tools, Mapping) else [(t, True) for t in tools]
    except TypeError:
        raise ConfigurationError("tools must be a collection of tool names") from None
    if not items:
        raise ConfigurationError("tools names no tool: list the tools that need approval")
    out: dict[str, dict[str, Any]] = {}
    for name, own in items:
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            raise ConfigurationError("tools must name tools by strings of 1 to 200 characters")
        if own is False:
            continue
        if own is True:
            own = {}
        if not isinstance(own, Mapping):
            raise ConfigurationError(
                f"the options of tool {name!r} must be True, False or a dict of options, "
                f"not {type(own).__name__}"
            )
        merged = {**shared, **own}
        build_spec(unknown_tool(), options=merged, name=name)  # names: once the tool is known
        out[name] = merged
    return out


def schema_arguments(schema: object) -> frozenset[str]:
    """The argument names a tool's JSON schema declares (its ``properties``)."""
    if isinstance(schema, Mapping):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            return frozenset(key for key in properties if isinstance(key, str))
    return frozenset()
