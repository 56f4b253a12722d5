"""The strict converters of one JSON value to one Python type, of which an annotation's is made.

Strict, to fail closed: a value that could mean two things (an integral float
for an ``int``, a long float for a ``Decimal``) is refused, never guessed at.
"""

from __future__ import annotations

import datetime as _dt
import enum
import math
import re
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from dateutil.parser import isoparse

from approval_guard._codec.exact_json import JSONNumber
from approval_guard._codec.marker import REDACTED_KEY
from approval_guard._codec.serialize import MAX_DEPTH, MAX_INT_DIGITS, same_json, to_json_value
from approval_guard.exceptions import ArgumentSerializationError

#: Takes the JSON value as ``json.loads`` decoded it (or ``_json.load_json``, whose
#: exact :class:`JSONNumber` it also takes); returns what the tool receives.
Converter = Callable[[Any], Any]


# Inside: the value and where it is ("lines[2]['price']"), for the message.
Inner = Callable[[Any, str], Any]


#: Longest text taken for a date-time or a UUID (their longest real forms are ~45).
MAX_TEXT = 64


#: A float with more significant digits is refused for a Decimal: its rounding is a guess.
MAX_FLOAT_DIGITS = 15


_INT_BOUND = 10**MAX_INT_DIGITS


_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


_INT_TEXT = re.compile(r"-?[0-9]+")


_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


_SURROGATE = re.compile("[\ud800-\udfff]")


class Unsupported(Exception):
    """A type (an annotation, a JSON schema, or a piece of one) no converter is built for.

    ``piece``: the part that is not, to name it in the message (None: the whole).
    """

    def __init__(self, piece: Any = None) -> None:
        super().__init__()
        self.piece = piece


class EditError(ValueError):
    """A reviewer's edit that does not convert to the parameter's type; the tool must not run.

    The message names the parameter and the JSON type, never more than a few
    characters of the value.
    """


def entry(name: str, inner: Inner) -> Converter:
    def convert(value: Any) -> Any:
        _check_plain(value, name)
        return inner(value, name)

    return convert


def _check_plain(value: Any, name: str) -> None:
    """Refuse what no edit can be, at any depth: not plain JSON, a redaction marker, too deep.

    A loop, not recursion, so a deep value is an :class:`EditError`, never a RecursionError.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            _check_text(item, name)
        elif kind is int:
            if not -_INT_BOUND < item < _INT_BOUND:
                raise EditError(
                    f"the edit of {name} holds an integer of more than {MAX_INT_DIGITS} digits"
                )
        elif kind is float:
            if not math.isfinite(item):
                raise EditError(f"the edit of {name} holds a number that is not finite")
        elif item is None or kind is bool or kind is JSONNumber:
            pass  # a JSONNumber is converted exactly by the number types, refused by the rest
        elif kind is list or kind is dict:
            # Containers on the path from the root: the same bound as to_json_value's.
            if depth >= MAX_DEPTH:
                raise EditError(f"the edit of {name} is nested more than {MAX_DEPTH} levels deep")
            if kind is list:
                stack.extend((child, depth + 1) for child in item)
                continue
            if REDACTED_KEY in item:
                raise EditError(
                    f"the edit of {name} holds a redaction marker ({REDACTED_KEY!r}), which "
                    "can never be an edited value"
                )
            for key, child in item.items():
                if type(key) is not str:
                    raise EditError(f"the edit of {name} holds an object key that is not a string")
                _check_text(key, name)
                stack.append((child, depth + 1))
        else:
            raise EditError(f"the edit of {name} holds a {kind.__name__}, which is not JSON")


def _check_text(text: str, name: str) -> None:
    if _SURROGATE.search(text):
        raise EditError(f"the edit of {name} holds a string that is not valid Unicode")


def _kind(value: Any) -> str:
    """The JSON type of a decoded value, for a message."""
    if value is None:
        return "null"
    if type(value) is JSONNumber:
        return "a JSON number"
    return {
        bool: "a JSON boolean",
        int: "a JSON integer",
        float: "a JSON number with a fraction or exponent",
        str: "a JSON string",
        list: "a JSON array",
        dict: "a JSON object",
    }.get(type(value), type(value).__name__)


def _wrong(path: str, expected: str, value: Any) -> EditError:
    return EditError(f"the edit of {clip(path, 80)} must be {expected}, not {_kind(value)}")


def _bad(path: str, what: str) -> EditError:
    return EditError(f"the edit of {clip(path, 80)} {what}")


def _int(value: Any, path: str) -> Any:
    if type(value) is int:
        return value
    if type(value) is JSONNumber and _INT_TEXT.fullmatch(value.text):
        try:
            if len(value.text.lstrip("-")) <= MAX_INT_DIGITS:
                return int(value.text)
        except ValueError:  # the interpreter's int_max_str_digits set lower
            pass
        raise _bad(path, f"is an integer too long to read (over {MAX_INT_DIGITS} digits)")
    if type(value) is JSONNumber or (type(value) is float and value.is_integer()):
        raise _bad(path, "must be a JSON integer, written without a decimal point or exponent")
    raise _wrong(path, "a JSON integer", value)


def _float(value: Any, path: str) -> Any:
    kind = type(value)
    if kind is float:
        return value  # finite: _check_plain refused the rest
    if kind is int:
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isfinite(number) and int(number) == value:
            return number
        raise _bad(path, "is an integer that a float cannot hold exactly")
    if kind is JSONNumber:
        exact = _decimal_text(value.text, path)
        number = float(value.text)
        if math.isfinite(number) and Decimal(number) == exact:
            return number
        raise _bad(path, "is a number that a float cannot hold exactly")
    raise _wrong(path, "a JSON number", value)


def _str(value: Any, path: str) -> Any:
    if type(value) is str:
        return value
    raise _wrong(path, "a JSON string", value)


def _bool(value: Any, path: str) -> Any:
    if type(value) is bool:
        return value
    raise _wrong(path, "true or false", value)


def _decimal(value: Any, path: str) -> Any:
    kind = type(value)
    if kind is int:
        return Decimal(value)
    if kind is JSONNumber:
        return _decimal_text(value.text, path)  # exact: what json.loads would have rounded
    if kind is float:
        text = repr(value)
        digits = "".join(map(str, Decimal(text).as_tuple().digits)).strip("0")
        if len(digits) > MAX_FLOAT_DIGITS:
            raise _bad(
                path,
                f"is a number with more than {MAX_FLOAT_DIGITS} significant digits, so its "
                "Decimal is a guess; write it as a string",
            )
        return Decimal(text)
    if kind is str:
        return _decimal_text(value, path)
    raise _wrong(path, "a decimal number (preferably as a string)", value)


def _decimal_text(text: str, path: str) -> Decimal:
    """The exact Decimal of plain ASCII notation: no NaN or Infinity, spaces or underscores.

    A JSONNumber's text is checked too: anyone can make one.
    """
    if not _DECIMAL_TEXT.fullmatch(text):
        raise _bad(path, 'must be a finite decimal number, such as "12.50"')
    try:
        return Decimal(text)
    except ArithmeticError:  # an exponent too large for Decimal
        raise _bad(path, "is a decimal number out of range") from None


def _text(value: Any, path: str, what: str) -> str:
    if type(value) is not str:
        raise _wrong(path, f"a JSON string holding {what}", value)
    if len(value) > MAX_TEXT:
        raise _bad(path, f"is longer than {MAX_TEXT} characters, too long for {what}")
    return value


def _datetime(value: Any, path: str) -> Any:
    text = _text(value, path, "an ISO 8601 date-time")
    try:
        return isoparse(text)
    except Exception:  # ValueError mostly; the parser's other failures mean the same
        raise _bad(path, "is not an ISO 8601 date-time") from None


def _date(value: Any, path: str) -> Any:
    text = _text(value, path, "a date")
    if _DATE_TEXT.fullmatch(text):
        try:
            return _dt.date.fromisoformat(text)
        except ValueError:
            pass
    raise _bad(path, "is not a date written YYYY-MM-DD")


def _uuid(value: Any, path: str) -> Any:
    text = _text(value, path, "a UUID")
    try:
        return uuid.UUID(text)
    except ValueError:
        raise _bad(path, "is not a UUID") from None


SIMPLE: dict[Any, Inner] = {
    int: _int,
    float: _float,
    str: _str,
    bool: _bool,
    Decimal: _decimal,
    _dt.datetime: _datetime,
    _dt.date: _date,
    uuid.UUID: _uuid,
}


def enum_of(cls: type[enum.Enum]) -> Inner:
    table: list[tuple[Any, enum.Enum]] = []
    for member in dict.fromkeys(cls.__members__.values()):  # aliases once
        try:
            table.append((to_json_value(member), member))
        except (ArgumentSerializationError, RecursionError):
            continue  # a value JSON cannot carry: no edit can choose this member
    label = clip(cls.__qualname__, 60)

    def convert(value: Any, path: str) -> Any:
        found = [member for json_value, member in table if same_json(json_value, value)]
        if len(found) == 1:
            return found[0]
        raise _bad(path, f"is not the value of exactly one member of {label}")

    return convert


def optional(inner: Inner) -> Inner:
    def convert(value: Any, path: str) -> Any:
        return None if value is None else inner(value, path)

    return convert


def list_of(item: Inner, result: type[list[Any]] | type[tuple[Any, ...]]) -> Inner:
    def convert(value: Any, path: str) -> Any:
        if type(value) is not list:
            raise _wrong(path, "a JSON array", value)
        return result(item(child, f"{path}[{i}]") for i, child in enumerate(value))

    return convert


def dict_of(item: Inner) -> Inner:
    def convert(value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise _wrong(path, "a JSON object", value)
        return {key: item(child, _key(path, key)) for key, child in value.items()}

    return convert


def bare(kind: type[Any], expected: str) -> Inner:
    def convert(value: Any, path: str) -> Any:
        if type(value) is not kind:
            raise _wrong(path, expected, value)
        return _plain_copy(value, path)

    return convert


def _plain_copy(value: Any, path: str) -> Any:
    """A deep copy of checked JSON (at most MAX_DEPTH deep, so recursion is safe)."""
    if type(value) is dict:
        return {key: _plain_copy(child, path) for key, child in value.items()}
    if type(value) is list:
        return [_plain_copy(child, path) for child in value]
    if type(value) is JSONNumber:
        # Free-form JSON has no type to say whether int, float or Decimal is meant.
        raise _bad(path, "holds a number that no int or float holds exactly")
    return value


def _key(path: str, key: str) -> str:
    shown = repr(key) if len(key) <= 20 else repr(key[:20])[:-1] + "...'"
    return f"{path}[{shown}]"


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
