"""Binding a call's arguments to parameter names and making them JSON.

The tool is always called with the caller's original objects; this module only
builds the JSON that is sent for approval (and compared with the provider's
echo). Output is deterministic: the same call gives the same bytes in every
process, so a replayed create is byte-identical.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import inspect
import math
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import attrs

from approval_guard._codec.exact_json import canonical_json
from approval_guard.exceptions import ArgumentSerializationError


def bind(
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    exclude: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Bind ``args``/``kwargs`` to parameter names, defaults applied, ``exclude`` left out.

    Raises ``TypeError`` (as calling the function would) when they do not fit.
    """
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items() if name not in exclude}


Binder = Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]


def binder(signature: inspect.Signature, *, exclude: frozenset[str] = frozenset()) -> Binder:
    """A :func:`bind` for one signature, with a fast path for plain parameters.

    Most tools take only positional-or-keyword parameters; for those, binding is
    a few dict operations. Anything unusual (``*args``, keyword-only, a call
    that does not fit) goes through :func:`bind`, which raises the right error.
    """

    def slow(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        return bind(signature, args, kwargs, exclude=exclude)

    params = list(signature.parameters.values())
    if any(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params):
        return slow
    names = tuple(p.name for p in params)
    known = frozenset(names)
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    kept = tuple(name for name in names if name not in exclude)
    every = len(kept) == len(names)

    def fast(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(names):
            return slow(args, kwargs)
        given = dict(zip(names, args, strict=False))  # fewer args than names is fine
        if every and not kwargs and len(args) == len(names):
            return given  # every name, in order, none left out: what the end below makes
        for key, value in kwargs.items():
            if key in given or key not in known:
                return slow(args, kwargs)
            given[key] = value
        if len(given) < len(names):
            for name in names:
                if name not in given:
                    if name not in defaults:
                        return slow(args, kwargs)
                    given[name] = defaults[name]
        return {name: given[name] for name in kept}

    return fast


def to_json_value(value: Any, *, path: str = "arguments") -> Any:
    """Convert ``value`` into plain JSON types, or raise :class:`ArgumentSerializationError`.

    ``Decimal`` becomes its exact string, ``datetime``/``date``/``time`` ISO 8601,
    ``UUID`` a string, ``Enum`` its value, dataclasses and attrs instances
    objects, tuples/lists lists, sets lists in a stable order.
    """
    if type(value) is dict:
        # The arguments themselves: what _convert and _contained do for a dict at the
        # root (no cycle yet, no depth), without their two calls.
        return _convert_container(value, path, {id(value)})
    return _convert(value, path, set())


#: Containers nested deeper than this are refused (the provider refuses deeper bodies).
MAX_DEPTH = 64
#: Integers with more digits are refused: Python's own default limit for int <-> text.
MAX_INT_DIGITS = 4300
_INT_BOUND = 10**MAX_INT_DIGITS
_NEG_INT_BOUND = -_INT_BOUND  # once: negating a 4300-digit int copies it

_PLAIN = frozenset({str, bool, type(None)})


def _checked_int(value: int, path: str) -> int:
    if _NEG_INT_BOUND < value < _INT_BOUND:
        return value
    raise ArgumentSerializationError(
        f"{path} is an integer of more than {MAX_INT_DIGITS} digits, which cannot be sent "
        "for approval; pass it as a string"
    )


def _short_repr(value: Any) -> str:
    """``repr`` for an error message: bounded, and never raising (a huge int's repr does)."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _convert(value: Any, path: str, active: set[int]) -> Any:
    # Exact plain types first: most arguments are, and isinstance chains are not free.
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is int:
        return _checked_int(value, path)
    if kind is float and math.isfinite(value):
        return value
    if kind is dict or kind is list:
        return _contained(value, path, active)  # none of the scalar types below
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, enum.Enum):
        return _convert(value.value, path, active)
    # A subclass's own conversions (__str__, __int__, __float__) may say something
    # else than the value the tool computes with: the base class's are used, so the
    # reviewer sees that value, and the echo (plain JSON types) compares equal.
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return _checked_int(int.__int__(value), path)
    if isinstance(value, float):
        number = float.__float__(value)
        if not math.isfinite(number):
            raise ArgumentSerializationError(
                f"{path} is {_short_repr(number)}, which JSON cannot represent; pass a finite "
                "number"
            )
        return number
    if isinstance(value, Decimal):
        if not Decimal.is_finite(value):
            raise ArgumentSerializationError(
                f"{path} is {_short_repr(value)}, which is not a finite Decimal"
            )
        return Decimal.__str__(value)
    if isinstance(value, _dt.datetime):
        return _dt.datetime.isoformat(value)
    if isinstance(value, _dt.date):
        return _dt.date.isoformat(value)
    if isinstance(value, _dt.time):
        return _dt.time.isoformat(value)
    if isinstance(value, uuid.UUID):
        return uuid.UUID.__str__(value)

    return _contained(value, path, active)


def _contained(value: Any, path: str, active: set[int]) -> Any:
    """A container (or an object made of fields) converted: never a cycle, never too deep."""
    marker = id(value)
    if marker in active:
        raise ArgumentSerializationError(f"{path} refers to itself; it cannot be made JSON")
    # ``active`` holds the containers on the path from the root: its size is the depth.
    if len(active) >= MAX_DEPTH:
        raise ArgumentSerializationError(
            f"{path} is nested more than {MAX_DEPTH} levels deep, which cannot be sent for "
            "approval; flatten it or exclude the parameter"
        )
    active.add(marker)
    try:
        return _convert_container(value, path, active)
    finally:
        active.discard(marker)


def _convert_container(value: Any, path: str, active: set[int]) -> Any:
    if type(value) is dict or isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                if isinstance(key, enum.Enum):
                    key = key.value
                if not isinstance(key, str):
                    raise ArgumentSerializationError(
                        f"{path} has a key {_short_repr(key)} of type {type(key).__name__}; "
                        "JSON object keys must be strings"
                    )
                key = str.__str__(key)  # a subclass's own __str__ is not what the tool looks up
            if key in out:
                # Two keys that become one (an Enum and its value) would hide one
                # entry from the reviewer while the tool still gets both.
                raise ArgumentSerializationError(
                    f"{path} has two keys that both become {key!r} in JSON"
                )
            # A plain value is itself: no path is written for it (only errors show one).
            kind = type(item)
            if (
                kind in _PLAIN
                or (kind is float and math.isfinite(item))
                or (kind is int and _NEG_INT_BOUND < item < _INT_BOUND)
            ):
                out[key] = item
            else:
                out[key] = _convert(item, f"{path}[{key!r}]", active)
        return out
    if isinstance(value, (list, tuple)):
        items: list[Any] = []
        for i, item in enumerate(value):
            kind = type(item)
            if (
                kind in _PLAIN
                or (kind is float and math.isfinite(item))
                or (kind is int and _NEG_INT_BOUND < item < _INT_BOUND)
            ):
                items.append(item)
            else:
                items.append(_convert(item, f"{path}[{i}]", active))
        return items
    if isinstance(value, (set, frozenset)):
        items = [_convert(item, f"{path}[*]", active) for item in value]
        # Set order varies between processes (hash randomisation): sort for stable bytes.
        return sorted(items, key=canonical_json)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _convert(getattr(value, f.name), f"{path}.{f.name}", active)
            for f in dataclasses.fields(value)
        }
    if attrs.has(type(value)):
        return {
            a.name: _convert(getattr(value, a.name), f"{path}.{a.name}", active)
            for a in attrs.fields(type(value))
        }
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, dict) and callable(getattr(value, "model_dump", None)):
        # A pydantic v2 model: every field as the tool will see it, read directly;
        # model_dump() would honour exclude=True and custom serialisers, and show
        # the reviewer less (or other) than the tool receives.
        extra = getattr(value, "__pydantic_extra__", None) or {}
        names = [*fields, *(name for name in extra if name not in fields)]
        return {name: _convert(getattr(value, name), f"{path}.{name}", active) for name in names}
    raise ArgumentSerializationError(
        f"{path} is a {type(value).__module__}.{type(value).__qualname__}, which cannot be "
        "made JSON for the approval request; pass plain data, or exclude the parameter"
    )


def dumps(payload: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8.

    Raises :class:`ArgumentSerializationError` for what JSON text cannot carry:
    a string with a lone surrogate (not UTF-8), or an integer longer than the
    interpreter's ``sys.set_int_max_str_digits`` allows.
    """
    try:
        return canonical_json(payload).encode()
    except UnicodeEncodeError:
        raise ArgumentSerializationError(
            "an argument holds a string that is not valid Unicode (a lone surrogate), "
            "which cannot be sent for approval"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ArgumentSerializationError(
            f"the arguments cannot be written as JSON: {str(exc)[:200]}"
        ) from None


_NUMBERS = (int, float)
#: Types whose two values are the same JSON exactly when ``==`` (as :func:`same_json` says).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1``; ``5`` and ``5.0`` are the same number."""
    kind = type(a)
    if kind is not type(b):
        # Only an int and a float may be the same JSON value (bool is its own type).
        return kind in _NUMBERS and type(b) in _NUMBERS and a == b
    if kind is dict:
        if a.keys() != b.keys():
            return False
        for key, value in a.items():
            other = b[key]
            # Two values of one scalar type are the same JSON exactly when equal (as
            # below): the commonest values are compared here, without a call.
            value_kind = type(value)
            if value_kind is type(other) and value_kind in _SCALARS:
                if value != other:
                    return False
            elif not same_json(value, other):
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):  # noqa: SIM110 (as above)
            if not same_json(x, y):
                return False
        return True
    return bool(a == b)


def same_or_too_deep(a: Any, b: Any) -> bool:
    """:func:`same_json`, False for structures too deep to compare."""
    try:
        return same_json(a, b)
    except RecursionError:
        return False
