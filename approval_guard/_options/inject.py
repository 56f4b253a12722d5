"""Recognising the parameters an agent framework fills in itself, so they are not sent for approval.

A framework passes some arguments to a tool on its own: a run context, a
config, a callback manager. They are not the model's arguments, a reviewer has
nothing to judge in them, and most of them cannot be made JSON. They are
recognised by the type a parameter is annotated with, compared by module and
qualified name along the class's MRO, so that no framework is ever imported
here and subclasses (``ToolContext`` of ``RunContextWrapper``,
``InjectedToolCallId`` of ``InjectedToolArg``) count too.

Recognition is deliberately narrow: a parameter wrongly taken for an injected
one would be hidden from the reviewer. An annotation that cannot be resolved
(a name imported only under ``TYPE_CHECKING``, or inside a factory under
``from __future__ import annotations``) is not guessed from its text. Where the
framework itself injects by parameter *name* (ADK's ``tool_context``), its
integration asks :func:`injected_by_name`: such a name counts as injected when
its annotation is absent or cannot be resolved, since the framework fills it in
whatever the annotation says. Otherwise the framework's object fails
serialisation loudly, and ``requires_approval(exclude=(...))`` names the
parameter explicitly.
"""

from __future__ import annotations

import collections.abc
import inspect
import logging
import types
import typing
from collections.abc import Callable, Collection
from typing import Any

log = logging.getLogger("approval_guard")

#: (module, qualified name) of the classes whose instances a framework injects.
#: A parameter is injected when its annotation is one of them or a subclass.
INJECTED_TYPES: frozenset[tuple[str, str]] = frozenset(
    {
        # OpenAI Agents SDK: the run context (ToolContext is a subclass).
        ("agents.run_context", "RunContextWrapper"),
        # LangChain: the run's config, its callbacks and run managers.
        ("langchain_core.runnables.config", "RunnableConfig"),
        ("langchain_core.callbacks.base", "BaseCallbackManager"),
        ("langchain_core.callbacks.base", "BaseCallbackHandler"),
        ("langchain_core.callbacks.manager", "BaseRunManager"),
        # LangChain: ``Annotated[..., InjectedToolArg]`` markers (InjectedToolCallId,
        # LangGraph's InjectedState and InjectedStore subclass it) and the directly
        # injected ToolRuntime.
        ("langchain_core.tools.base", "InjectedToolArg"),
        ("langchain_core.tools.base", "_DirectlyInjectedToolArg"),
        # Pydantic AI: the run context a tool made with @agent.tool takes first.
        ("pydantic_ai._run_context", "RunContext"),
        # MCP Python SDK: MCPServer's Context (2.x) and FastMCP's (1.x).
        ("mcp.server.mcpserver.context", "Context"),
        ("mcp.server.fastmcp.server", "Context"),
        # Google ADK: ToolContext (2.x: an alias of google.adk.agents.context.Context;
        # 1.x: its own class) and the CallbackContext it extends.
        ("google.adk.agents.context", "Context"),
        ("google.adk.tools.tool_context", "ToolContext"),
        ("google.adk.agents.callback_context", "CallbackContext"),
    }
)

_NONE_TYPE = type(None)
_UNION_ORIGINS: tuple[Any, ...] = (typing.Union, types.UnionType)
_SEQUENCE_ORIGINS: tuple[Any, ...] = (list, tuple, collections.abc.Sequence)
_MISSING = object()


def injected_parameters(fn: Callable[..., Any], signature: inspect.Signature) -> frozenset[str]:
    """The names of ``fn``'s parameters that a framework injects, by their annotations.

    ::

        def lookup(ctx: RunContextWrapper[Deps], order_id: str) -> str: ...

        injected_parameters(lookup, inspect.signature(lookup))  # frozenset({"ctx"})
    """
    annotations = _resolved_annotations(fn, signature)
    found = frozenset(name for name, annotation in annotations.items() if _is_injected(annotation))
    if found:
        log.debug(
            "parameters of %s injected by a framework, not sent for approval: %s",
            getattr(fn, "__qualname__", fn),
            sorted(found),
        )
    return found


def injected_by_name(
    fn: Callable[..., Any], signature: inspect.Signature, names: Collection[str]
) -> frozenset[str]:
    """Of ``names`` (those a framework injects by name), the ones ``fn`` takes unresolved.

    A parameter of one of these names counts as injected when it has no
    annotation, or one that cannot be resolved: the framework fills it in by its
    name either way. A resolved annotation is judged by :func:`injected_parameters`
    (``tool_context: str`` is the model's argument).
    """
    present = [name for name in names if name in signature.parameters]
    if not present:
        return frozenset()
    resolved = _resolved_annotations(fn, signature)
    return frozenset(name for name in present if name not in resolved)


def _resolved_annotations(fn: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """Each named parameter's annotation, with string annotations evaluated where possible."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        # One unresolvable annotation (a TYPE_CHECKING import, say) must not hide
        # the others: resolve each parameter's on its own below.
        hints = {}
    resolved: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(name, parameter.annotation)
        if annotation is parameter.empty:
            continue
        if isinstance(annotation, str):
            annotation = _evaluate(annotation, fn)
            if annotation is _MISSING:
                continue
        resolved[name] = annotation
    return resolved


def _evaluate(text: str, fn: Callable[..., Any]) -> Any:
    """A string annotation evaluated in ``fn``'s module, or ``_MISSING``.

    ``RunContextWrapper[MyDeps]`` whose ``MyDeps`` is local to a function cannot
    be evaluated whole; its head, ``RunContextWrapper``, still says what it is.
    """
    namespace = getattr(inspect.unwrap(fn), "__globals__", None)
    if not isinstance(namespace, dict):
        return _MISSING
    for candidate in (text, _subscript_head(text)):
        if candidate is None:
            continue
        try:
            # What typing.get_type_hints does, one annotation at a time.
            return eval(candidate, namespace)
        except Exception:
            continue
    return _MISSING


def _subscript_head(text: str) -> str | None:
    """``"X[...]"`` -> ``"X"`` when the whole annotation is one subscript; else None.

    ``"X[A] | str"`` is not one subscript (the ``]`` that closes ``X[`` is not
    the end), so it gives None: the other arm might be a real argument.
    """
    text = text.strip()
    start = text.find("[")
    if start <= 0 or not text.endswith("]"):
        return None
    depth = 0
    for index in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[index], 0)
        if depth == 0:
            return text[:start] if index == len(text) - 1 else None
    return None


def _is_injected(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        return _is_injected(base) or any(_is_injected_marker(item) for item in metadata)
    if origin in _UNION_ORIGINS:
        # Every arm but None must be injected: `RunContextWrapper | None` is;
        # `str | RunnableConfig` is not (it may carry a real argument).
        arms = [arm for arm in typing.get_args(annotation) if arm is not _NONE_TYPE]
        return bool(arms) and all(_is_injected(arm) for arm in arms)
    if origin in _SEQUENCE_ORIGINS:
        # LangChain's Callbacks: list[BaseCallbackHandler] | BaseCallbackManager | None.
        items = [item for item in typing.get_args(annotation) if item is not Ellipsis]
        return bool(items) and all(_is_injected(item) for item in items)
    if origin is not None:
        annotation = origin  # RunContextWrapper[Deps] -> RunContextWrapper
    return _is_injected_class(annotation)


def _is_injected_marker(marker: Any) -> bool:
    """``Annotated`` metadata: a marker class (InjectedToolArg) or an instance of one."""
    return _is_injected_class(marker if isinstance(marker, type) else type(marker))


def _is_injected_class(cls: Any) -> bool:
    if not isinstance(cls, type):
        return False
    return any(
        (getattr(base, "__module__", None), getattr(base, "__qualname__", None)) in INJECTED_TYPES
        for base in getattr(cls, "__mro__", (cls,))
    )
