"""Redaction: secrets never reach the reviewer; the tool still gets the real value.

A redacted value is sent as the marker ``{"$redacted": "<12 hex>"}``: the
first 12 hex digits of an HMAC-SHA256 of the value's canonical JSON, keyed
per :class:`~approval_guard.Guard`. The key is secret, so the digest cannot be
reversed by trying every candidate (every four-digit PIN); it is stable for
the key's life, so a reviewer can tell two values apart.

``redact`` is either dotted paths (``"api_key"``, ``"card.number"``) into the
arguments as sent (dicts, dataclasses, attrs and pydantic objects are objects
there; a path through a list applies to every item), or a callable that gets
a copy of the JSON arguments and returns them with secrets changed: every
place it changed or left out becomes a marker of the *original* value, so it
can hide a value but never show the reviewer one the tool does not get.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import hmac
import secrets
from collections.abc import Callable, Collection
from typing import Any

from approval_guard._codec.exact_json import canonical_json
from approval_guard._codec.marker import DIGEST_LENGTH, REDACTED_KEY
from approval_guard._codec.serialize import to_json_value
from approval_guard.exceptions import ConfigurationError

Paths = tuple[tuple[str, ...], ...]
RedactFn = Callable[[dict[str, Any]], Any]


class RedactionFailed(Exception):
    """A ``redact`` callable raised or returned something that is not the arguments."""


def new_key() -> bytes:
    return secrets.token_bytes(32)


def check_key(key: object) -> bytes:
    """A Guard's ``redaction_key``: at least 16 bytes (a str is UTF-8 encoded)."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes) or len(key) < 16:
        raise ConfigurationError("redaction_key must be a secret of at least 16 bytes")
    return key


def check_redact(
    redact: object, parameters: Collection[str] | None, exclude: Collection[str], tool: str
) -> Paths | RedactFn | None:
    """``redact`` checked at decoration: paths that start at a sent parameter, or a callable.

    ``parameters``: the tool's parameter names (a signature's ``parameters``, or
    the argument names a framework's schema declares); None while they are not
    known (only the paths' form is checked).
    """
    if redact is None:
        return None
    if callable(redact):
        return redact  # type: ignore[return-value,unused-ignore]
    if isinstance(redact, str):
        raise ConfigurationError(
            "redact must be a collection of parameter names or dotted paths, not a string"
        )
    try:
        items: tuple[object, ...] = tuple(redact)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigurationError(
            "redact must be parameter names or dotted paths, or a callable"
        ) from None
    paths: list[tuple[str, ...]] = []
    for item in items:
        if not isinstance(item, str) or not item or any(not part for part in item.split(".")):
            raise ConfigurationError(
                f"redact paths must be names joined by dots, like 'card.number', not {item!r}"
            )
        parts = tuple(item.split("."))
        if parameters is not None and parts[0] not in parameters:
            raise ConfigurationError(
                f"redact names {item!r}, but {tool} has no parameter {parts[0]!r}"
            )
        if parts[0] in exclude:
            raise ConfigurationError(
                f"redact names {item!r}, but {parts[0]!r} is excluded and is never sent"
            )
        paths.append(parts)
    return tuple(paths)


def redacted_names(redact: Paths | RedactFn | None) -> frozenset[str]:
    """Top-level names that paths redact (in part or whole); a callable's are unknown."""
    if redact is None or callable(redact):
        return frozenset()
    return frozenset(path[0] for path in redact)


_SCALARS = {True: "true", False: "false", None: "null"}


@functools.lru_cache(maxsize=64)
def _keyed(key: bytes) -> Any:
    """The HMAC state after the key, made once per key and copied per marker (it is faster).

    On OpenSSL builds the C HMAC object under ``hmac.HMAC`` is kept: its own
    ``copy``, ``update`` and ``hexdigest`` are the same, without the Python wrapper.
    """
    mac = hmac.new(key, digestmod=hashlib.sha256)
    return getattr(mac, "_hmac", None) or mac


def marker(value: Any, key: bytes) -> dict[str, str]:
    # surrogatepass: a secret that is not valid Unicode is never sent, so it is hidden as any other.
    mac = _keyed(key).copy()
    kind = type(value)
    # The canonical JSON of a number, true, false or null is its plain text: written
    # directly, as the general writer is slow for scalars (same text, same digest).
    if kind is int:
        text = int.__repr__(value)
    elif kind is bool or value is None:
        text = _SCALARS[value]
    else:
        text = canonical_json(value)
    mac.update(text.encode("utf-8", "surrogatepass"))
    return {REDACTED_KEY: mac.hexdigest()[:DIGEST_LENGTH]}


def redact(arguments: dict[str, Any], how: Paths | RedactFn, key: bytes) -> dict[str, Any]:
    """``arguments`` (plain JSON, as made for approval) with the secrets replaced by markers.

    The input is not changed. Raises :class:`RedactionFailed` for a callable
    that raises or does not return an object.
    """
    if callable(how):
        try:
            returned = how(copy.deepcopy(arguments))
        except Exception as exc:
            raise RedactionFailed(f"the redact function raised {type(exc).__name__}") from None
        if not isinstance(returned, dict):
            raise RedactionFailed(
                f"the redact function returned a {type(returned).__name__}, not the arguments"
            )
        try:
            # A dict subclass (an OrderedDict) is read as the plain dict it holds.
            hidden: dict[str, Any] = _differences_hidden(arguments, dict(returned), key)
        except Exception as exc:  # it returned something JSON cannot compare (a set, a cycle)
            raise RedactionFailed(
                f"the redact function returned values that are not JSON ({type(exc).__name__})"
            ) from None
        return hidden
    out = dict(arguments)
    for path in how:
        if path[0] in out:
            out[path[0]] = _hide(out[path[0]], path[1:], key)
    return out


def _hide(value: Any, rest: tuple[str, ...], key: bytes) -> Any:
    if not rest:
        return marker(value, key)
    if isinstance(value, dict):
        if rest[0] not in value:
            return value
        out = dict(value)
        out[rest[0]] = _hide(value[rest[0]], rest[1:], key)
        return out
    if isinstance(value, list):
        return [_hide(item, rest, key) for item in value]
    if value is None:
        return None  # nothing there to hide
    # A value the path cannot go into (a string where an object was expected):
    # the secret may be all of it, so all of it is hidden.
    return marker(value, key)


def _differences_hidden(original: Any, returned: Any, key: bytes) -> Any:
    """``original`` with every place ``returned`` differs from it made a marker."""
    if type(original) is dict and type(returned) is dict:
        return {
            name: (
                _differences_hidden(item, returned[name], key)
                if name in returned
                else marker(item, key)
            )
            for name, item in original.items()
        }
    if type(original) is list and type(returned) is list and len(original) == len(returned):
        return [_differences_hidden(a, b, key) for a, b in zip(original, returned, strict=True)]
    if type(original) is type(returned) and canonical_json(original) == canonical_json(returned):
        return original
    return marker(original, key)


def as_reviewed(bound: dict[str, Any], how: Paths | RedactFn | None, key: bytes) -> dict[str, Any]:
    """The bound arguments as a reviewer would see them; values that cannot be shown, None."""
    try:
        real = to_json_value(bound)
        return real if how is None else redact(real, how, key)
    except Exception:
        return {name: None for name in bound}
