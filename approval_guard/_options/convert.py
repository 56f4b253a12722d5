"""A reviewer's edit (JSON) -> the Python value an editable parameter's annotation names.

Built when a tool is decorated, so an annotation no edit could be converted to
is refused then; used when an approved call runs. Strict, to fail closed: a
value that could mean two things (an integral float for an ``int``, a long
float for a ``Decimal``) is refused, never guessed at.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Callable, Collection
from typing import Any

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
    enum_of,
    list_of,
    optional,
)
from approval_guard.exceptions import ConfigurationError

__all__ = ["Converter", "EditError", "editable_converters"]


_EDITABLE_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_SUPPORTED = (
    "int, float, str, bool, Decimal, datetime, date, UUID, an Enum, list[X], "
    "tuple[X, ...], dict[str, X], a bare list or dict, or Optional[X]"
)


def editable_converters(
    fn: Callable[..., Any], signature: inspect.Signature, names: Collection[str]
) -> dict[str, Converter]:
    """One converter per editable parameter of ``fn``, or :class:`ConfigurationError`.

    Each name must be a parameter that can be passed by keyword, annotated
    with a type an edit can be converted to. Annotations are resolved with
    ``typing.get_type_hints`` (so string annotations work)::

        converters = editable_converters(refund, inspect.signature(refund), ("amount",))
        converters["amount"]("12.50")  # Decimal('12.50') for ``amount: Decimal``
    """
    if isinstance(names, (str, bytes)):
        raise ConfigurationError(
            "editable must be a collection of parameter names, not one string; "
            "write editable=('amount',)"
        )
    where = _describe_fn(fn)
    hints = _all_hints(fn)
    converters: dict[str, Converter] = {}
    for name in names:
        if not isinstance(name, str):
            raise ConfigurationError(
                f"editable holds a {type(name).__name__}; it must list parameter names as strings"
            )
        param = signature.parameters.get(name)
        if param is None:
            raise ConfigurationError(
                f"editable names {_short(name)}, which is not a parameter of {where}"
            )
        if param.kind not in _EDITABLE_KINDS:
            raise ConfigurationError(
                f"editable parameter {name!r} of {where} is {param.kind.description}; only "
                "parameters that can be passed by keyword can be edited"
            )
        annotation = _annotation(fn, param, hints, where)
        try:
            inner = _build(annotation)
        except Unsupported as exc:
            whole = _describe(annotation)
            piece = _describe(exc.piece)
            part = "which" if piece == whole else f"and {piece} in it"
            raise ConfigurationError(
                f"editable parameter {name!r} of {where} is annotated {whole}, {part} is not a "
                f"type an edit can be converted to (use {_SUPPORTED})"
            ) from None
        converters[name] = entry(name, inner)
    return converters


# -- annotations -------------------------------------------------------------


def _hint_source(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """The function whose annotations are ``fn``'s parameters' (a callable object's __call__)."""
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        return fn
    # An object's own __annotations__ (if any) describe its attributes, not the parameters.
    call = inspect.getattr_static(type(fn), "__call__", None)
    if not isinstance(fn, type) and isinstance(call, types.FunctionType):
        return call
    return None


def _all_hints(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """``fn``'s resolved annotations, or None if they cannot all be resolved."""
    source = _hint_source(fn)
    if source is None:
        return None
    try:
        return typing.get_type_hints(source, include_extras=True)
    except Exception:  # NameError for a TYPE_CHECKING-only name, TypeError, SyntaxError...
        return None


def _annotation(
    fn: Callable[..., Any], param: inspect.Parameter, hints: dict[str, Any] | None, where: str
) -> Any:
    if hints is not None and param.name in hints:
        return hints[param.name]
    raw = param.annotation
    if raw is inspect.Parameter.empty:
        raise ConfigurationError(
            f"editable parameter {param.name!r} of {where} has no type annotation, so an edit "
            "of it cannot be converted; annotate it or leave it out of editable"
        )
    if not isinstance(raw, str):
        return raw
    # Another parameter's annotation may be what failed (a name imported only under
    # TYPE_CHECKING): this one alone may still resolve in fn's globals.
    source = _hint_source(fn)
    try:
        target = inspect.unwrap(source) if source is not None else None
    except ValueError:  # a __wrapped__ cycle
        target = None
    namespace = getattr(target, "__globals__", None)
    if isinstance(namespace, dict):
        shim = types.SimpleNamespace(__annotations__={param.name: raw})
        try:
            return typing.get_type_hints(shim, globalns=namespace, include_extras=True)[param.name]
        except Exception:
            pass
    raise ConfigurationError(
        f"the annotation of editable parameter {param.name!r} of {where} could not be resolved "
        "to a type; import the names it uses at module level"
    )


def _build(ann: Any) -> Inner:
    """The converter for ``ann``, or :class:`Unsupported` naming the piece that is not."""
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        return _build(args[0])
    if origin is typing.Union or origin is types.UnionType:
        others = [a for a in args if a is not type(None)]
        if len(others) != 1:
            raise Unsupported(ann)  # Union[int, str]: which type an edit means is a guess
        return optional(_build(others[0]))
    if origin is list or ann is list:
        if not args:
            return bare(list, "a JSON array")
        return list_of(_build(args[0]), list)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return list_of(_build(args[0]), tuple)
        raise Unsupported(ann)
    if origin is dict or ann is dict:
        if not args:
            return bare(dict, "a JSON object")
        if args[0] is not str:
            raise Unsupported(ann)
        return dict_of(_build(args[1]))
    if origin is None and isinstance(ann, type):
        if issubclass(ann, enum.Enum):
            return enum_of(ann)
        # Exact types only: a str or int subclass may mean more than its base.
        simple = SIMPLE.get(ann)
        if simple is not None:
            return simple
    raise Unsupported(ann)


def _describe(ann: Any) -> str:
    if typing.get_origin(ann) is None and isinstance(ann, type):
        name = ann.__qualname__
        return name if ann.__module__ == "builtins" else f"{ann.__module__}.{name}"
    return clip(repr(ann), 80)


def _describe_fn(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None)
    return clip(name if isinstance(name, str) else type(fn).__name__, 80)


# -- converters --------------------------------------------------------------


def _short(name: str) -> str:
    return clip(repr(name), 60)
