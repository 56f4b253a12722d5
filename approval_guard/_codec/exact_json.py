"""Exact JSON: numbers kept as written, one canonical form; the package's only JSON codec.

What the reviewer is shown, what the store keeps, what the adapter sends and
gets echoed must be one value. Python's json would turn ``1e400`` into ``inf``
(and write the invalid ``Infinity``), ``-0`` into ``0`` and ``1E5`` into
``100000.0``, and would keep the last of two equal keys. So a number that no
Python number writes back unchanged is kept as its source text
(:class:`JSONNumber`), and JSON that could not be kept exactly is refused.
"""

from __future__ import annotations

import decimal
import json
import json.encoder
import math
from typing import Any

import attrs

#: How deeply arguments may nest arrays and objects (the arguments object is level 1).
MAX_JSON_DEPTH = 64
# Every CPython accepts this many digits in int(); int_max_str_digits cannot go lower.
_SAFE_INT_DIGITS = 640


class InvalidJSON(ValueError):
    """JSON the store refuses: malformed, duplicate keys, too deep, NaN, lone surrogates."""


@attrs.frozen
class JSONNumber:
    """A JSON number kept as its exact source text, e.g. ``JSONNumber("1e400")``.

    Only numbers that no ``int`` or ``float`` would write back unchanged are
    kept this way (``1e400``, ``-0``, ``1E5``, ``0.10000000000000000001``, a
    700-digit integer); every other number is a plain ``int`` or ``float``.
    """

    text: str

    def __str__(self) -> str:
        return self.text


def _int(text: str) -> int | JSONNumber:
    if text == "-0" or len(text) > _SAFE_INT_DIGITS:
        return JSONNumber(text)
    return int(text)


def _float(text: str) -> float | JSONNumber:
    value = float(text)
    if math.isfinite(value) and float.__repr__(value) == text:
        return value
    return JSONNumber(text)


#: Integers with more digits are refused as edits: Python's own default limit for int <-> text.
READABLE_INT_DIGITS = 4300


def unreadable_number(value: object) -> str | None:
    """The first number in ``value`` that no reader gets as a number, as written; else None.

    That is a number past a double's range (``1e400``, which most JSON readers
    make infinity), one too small to tell from 0 that is not 0 (``1e-400``),
    and an integer of more than :data:`READABLE_INT_DIGITS` digits (Python
    refuses to read it). A provider refuses such a value as a reviewer's edit,
    since the adapter could not run it; a create may still carry one.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, JSONNumber):
            text = item.text
            digits = text.lstrip("-")
            if digits.isdigit():
                if len(digits) > READABLE_INT_DIGITS:
                    return f"an integer of {len(digits)} digits"
                continue
            try:
                number = float(text)
                exact = decimal.Decimal(text)
            except (ValueError, decimal.InvalidOperation):
                return text[:40]
            if not math.isfinite(number) or (number == 0 and exact != 0):
                return text[:40]
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def _answer_float(text: str) -> float | JSONNumber:
    """A float when it is the number written (``0.10`` is ``0.1``); else the exact text.

    ``0.10000000000000000001`` or ``1e400`` would silently become another
    number as a float: kept as a :class:`JSONNumber`, it is equal to no float
    (:func:`~approval_guard._codec.serialize.same_json`), so a reviewer's edit that a
    float cannot hold is never run as the float nearest to it.
    """
    value = float(text)
    if math.isfinite(value) and (
        float.__repr__(value) == text or decimal.Decimal(text) == decimal.Decimal(repr(value))
    ):
        return value
    return JSONNumber(text)


def load_answer(raw: bytes | str) -> Any:
    """A provider's answer body: as ``json.loads``, but numbers no float can hold stay exact."""
    return json.loads(raw, parse_float=_answer_float)


def _refuse_constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not valid JSON")


def _legacy_constant(name: str) -> str:
    # Only versions before exact numbers stored NaN/Infinity (from 1e400). Read
    # back as a string, the echo no longer matches what the adapter sent (so it
    # does not run) and the JSON we write stays valid.
    return name


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                shown = json.dumps(key)[:80]
                raise InvalidJSON(
                    f"an object has the key {shown} twice; a reviewer would see one value "
                    "and the tool could get the other"
                )
            seen.add(key)
    return obj


def load_json(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse untrusted JSON exactly (see :class:`JSONNumber`), or raise :class:`InvalidJSON`.

    Refused: malformed JSON, ``NaN``/``Infinity``, an object with a key twice,
    nesting deeper than ``max_depth``, strings with a lone surrogate.
    """
    try:
        if text.startswith("\ufeff"):
            # What json.loads says (its decoder's decode() would only say "Expecting value").
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _UNTRUSTED.decode(text)
    except RecursionError:
        raise InvalidJSON(f"the JSON nests more than {max_depth} levels deep") from None
    except InvalidJSON:
        raise
    except ValueError as exc:
        raise InvalidJSON(f"not valid JSON: {exc}") from None
    check_json_value(value, max_depth=max_depth)
    return value


def load_stored(text: str) -> Any:
    """Parse JSON this store wrote (trusted, so unchecked), keeping numbers exact."""
    return _STORED.decode(text)


# Built once: json.loads with options makes a new decoder on every call.
_STORED = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_legacy_constant)
_UNTRUSTED = json.JSONDecoder(
    parse_int=_int,
    parse_float=_float,
    parse_constant=_refuse_constant,
    object_pairs_hook=_object,
)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJSON(
                "a string holds a lone surrogate (\\ud800-\\udfff), which has no UTF-8 form"
            ) from None


def check_json_value(value: object, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`InvalidJSON` unless ``value`` is JSON the store can keep exactly.

    That is: str-keyed dicts, lists, strings without lone surrogates, finite
    floats, ints, bools, None and :class:`JSONNumber`, nested at most
    ``max_depth`` levels deep.
    """
    if not _fits(value, max_depth):
        raise InvalidJSON(f"the JSON nests more than {max_depth} levels deep")


def _fits(value: object, depth_left: int) -> bool:
    """False if ``value`` nests deeper than ``depth_left``; raises for what JSON cannot hold."""
    if isinstance(value, str):
        _check_text(value)
    elif value is None or isinstance(value, (bool, int, JSONNumber)):
        pass
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJSON(f"{value!r} is not a JSON number")
    elif isinstance(value, dict):
        if depth_left <= 0:
            return False
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidJSON(f"an object key is a {type(key).__name__}, not a string")
            _check_text(key)
            if not _fits(item, depth_left - 1):
                return False
    elif isinstance(value, (list, tuple)):
        if depth_left <= 0:
            return False
        return all(_fits(item, depth_left - 1) for item in value)
    else:
        raise InvalidJSON(f"a {type(value).__name__} is not a JSON value")
    return True


class _HasJSONNumber(Exception):
    """Raised out of the C encoder's ``default`` hook: this value needs the exact writer."""


def _no_json_number(value: object) -> Any:
    if isinstance(value, JSONNumber):
        raise _HasJSONNumber
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


# The C accelerator json.JSONEncoder uses for compact output (None without it), and
# its string writers; arguments: markers, default, string writer, indent, key and
# item separators, sort_keys, skipkeys, allow_nan (the same since Python 3.10).
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_string: Any = getattr(json.encoder, "c_encode_basestring", None)
_c_ascii: Any = getattr(json.encoder, "c_encode_basestring_ascii", None)
if _c_string is None or _c_ascii is None:
    _c_make_encoder = None

# Built once: json.dumps with options makes a new encoder on every call.
_ENCODERS = {
    (sort_keys, indent, ascii_only): json.JSONEncoder(
        ensure_ascii=ascii_only,
        allow_nan=False,
        sort_keys=sort_keys,
        indent=indent,
        separators=(",", ": ") if indent is not None else (",", ":"),
        default=_no_json_number,
    )
    for sort_keys in (False, True)
    for indent in (None, 2)
    for ascii_only in (False, True)
}


def dump_json(
    value: object,
    *,
    sort_keys: bool = False,
    indent: int | None = None,
    ensure_ascii: bool = False,
) -> str:
    """Write JSON with every :class:`JSONNumber` as its exact text; compact unless ``indent``.

    Without a :class:`JSONNumber` in ``value`` this is ``json.dumps`` (the C
    encoder) with ``allow_nan=False`` and ``ensure_ascii`` (False by default:
    ``True`` writes every other character as a ``\\u`` escape, for a terminal);
    the output has the same layout either way.
    """
    if indent is None and _c_make_encoder is not None:
        # What JSONEncoder.encode does for a compact encoder, less its Python layers:
        # the C encoder, made per call as encode makes it (its cycle markers are its own).
        try:
            return "".join(
                _c_make_encoder(
                    {},
                    _no_json_number,
                    _c_ascii if ensure_ascii else _c_string,
                    None,
                    ":",
                    ",",
                    sort_keys,
                    False,
                    False,
                )(value, 0)
            )
        except _HasJSONNumber:
            pass
    else:
        encoder = _ENCODERS.get((sort_keys, indent, ensure_ascii))
        if encoder is not None:
            try:
                return encoder.encode(value)
            except _HasJSONNumber:
                pass
    strings = _ASCII_STRING if ensure_ascii else _STRING
    return _encode(value, sort_keys, indent, 0, strings)


_STRING = json.JSONEncoder(ensure_ascii=False)
_ASCII_STRING = json.JSONEncoder(ensure_ascii=True)


def _encode(
    value: object, sort_keys: bool, indent: int | None, level: int, strings: json.JSONEncoder
) -> str:
    if isinstance(value, JSONNumber):
        return value.text
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return strings.encode(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        return float.__repr__(value)
    if isinstance(value, dict):
        pairs = sorted(value.items(), key=lambda pair: pair[0]) if sort_keys else value.items()
        parts = [
            f"{strings.encode(key)}{':' if indent is None else ': '}"
            f"{_encode(item, sort_keys, indent, level + 1, strings)}"
            for key, item in pairs
        ]
        return _join("{", parts, "}", indent, level)
    if isinstance(value, (list, tuple)):
        parts = [_encode(item, sort_keys, indent, level + 1, strings) for item in value]
        return _join("[", parts, "]", indent, level)
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


def _join(opening: str, parts: list[str], closing: str, indent: int | None, level: int) -> str:
    if not parts:
        return opening + closing
    if indent is None:
        return opening + ",".join(parts) + closing
    inner = "\n" + " " * (indent * (level + 1))
    return opening + inner + ("," + inner).join(parts) + "\n" + " " * (indent * level) + closing


def canonical_json(value: object) -> str:
    """Key-sorted, compact, exact JSON: equal values give equal text (used for body hashes)."""
    return dump_json(value, sort_keys=True)
