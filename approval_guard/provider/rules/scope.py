"""The scope language of grants and auto-decisions: per-argument constraints, checked and matched.

One CONSTRAINT per argument (docs/asking-less.md):

- ``"same"``: exactly the granted request's value (compared as canonical JSON,
  so a redacted value is compared by its keyed digest); grants only;
- ``"any"``: any value;
- ``{"min": n, "max": n}`` (either or both, inclusive): numbers compared exactly
  as decimals, never as floats. When every bound is a JSON integer, only JSON
  integers are covered (``1000.0``, ``1e3`` and ``500.5`` are not); a bound
  written with a fraction or an exponent covers any number. ``true`` and
  ``false`` are never numbers;
- ``{"in": [values]}``: one of these JSON scalars, of the same JSON type;
- ``{"prefix": "str"}``: a string starting with exactly these characters (no
  glob, regex, case folding or Unicode normalisation).

Pure functions: the store matches in the create's transaction, the rules file
and the decision endpoint check what they are given with the same code, so a
scope that parses is a scope that matches the same way everywhere.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Mapping
from typing import Any

from approval_guard._codec.exact_json import JSONNumber, canonical_json
from approval_guard._codec.marker import holds_marker_key
from approval_guard.exceptions import ProviderError

SAME = "same"
ANY = "any"
#: The most values an ``in`` constraint may list.
MAX_IN = 100
#: The longest prefix (and ``in`` string) a constraint may hold.
MAX_TEXT = 1000
_INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")


class ScopeError(ProviderError, ValueError):
    """A constraint that cannot be used; the message names the argument and why."""


#: A checked constraint: ``"same"``, ``"any"`` or a one-key-kind dict as documented above.
Constraint = Any


def is_number(value: object) -> bool:
    """A JSON number (never ``true``/``false``)."""
    return (
        isinstance(value, (int, float, JSONNumber, decimal.Decimal))
        and not isinstance(value, bool)
        and (not isinstance(value, (float, decimal.Decimal)) or _finite(value))
    )


def _finite(value: float | decimal.Decimal) -> bool:
    return decimal.Decimal(repr(value) if isinstance(value, float) else value).is_finite()


def is_integer(value: object) -> bool:
    """A JSON integer as written (``1000``, not ``1000.0`` nor ``1e3``)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, JSONNumber) and bool(_INTEGER_TEXT.fullmatch(value.text))


#: A JSON number's parts as written: sign, digits, fraction digits, exponent.
_NUMBER_TEXT = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")
#: The most digits a bound's or a listed number's exponent may have (an
#: exponent this long is beyond every quantity; a value's is clamped past it).
MAX_EXPONENT_DIGITS = 600
_CLAMP = 10 ** (MAX_EXPONENT_DIGITS + 1)


def _parts(value: object) -> tuple[int, int, str]:
    """``(sign, adjusted exponent, significant digits)``: a JSON number's exact value.

    Never through ``Decimal`` alone: ``1e9999999999999999999999`` is valid JSON
    that no ``Decimal`` can hold, and an exponent of thousands of digits is more
    than ``int()`` reads. A value's exponent beyond :data:`MAX_EXPONENT_DIGITS`
    digits is clamped past every bound's (bounds are refused beyond it), so
    every comparison with a bound stays exact.
    """
    if isinstance(value, (JSONNumber, float)):
        text = value.text if isinstance(value, JSONNumber) else repr(value)
        found = _NUMBER_TEXT.fullmatch(text)
        if found is None:
            raise ScopeError("not a number")
        sign_text, whole, fraction, exponent_text = found.groups()
        fraction = fraction or ""
        digits = whole + fraction
        exponent_text = exponent_text or "0"
        negative_exponent = exponent_text.startswith("-")
        exponent_digits = exponent_text.lstrip("+-").lstrip("0") or "0"
        if len(exponent_digits) > MAX_EXPONENT_DIGITS:
            exponent = -_CLAMP if negative_exponent else _CLAMP
        else:
            exponent = -int(exponent_digits) if negative_exponent else int(exponent_digits)
        exponent -= len(fraction)
        sign = -1 if sign_text else 1
    elif isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
        exact = decimal.Decimal(value).as_tuple()
        if not isinstance(exact.exponent, int):
            raise ScopeError("not a number")
        digits = "".join(str(one) for one in exact.digits)
        exponent = exact.exponent
        sign = -1 if exact.sign else 1
    else:
        raise ScopeError("not a number")
    significant = digits.lstrip("0")
    if not significant:
        return 0, 0, ""
    kept = significant.rstrip("0")
    # The exponent of the first significant digit: 1234.5 is 1.2345e3.
    return sign, exponent + len(significant) - 1, kept


def compare_numbers(left: object, right: object) -> int:
    """-1, 0 or 1 as JSON number ``left`` is below, equal to or above ``right``, exactly."""
    left_sign, left_exponent, left_digits = _parts(left)
    right_sign, right_exponent, right_digits = _parts(right)
    if left_sign != right_sign:
        return -1 if left_sign < right_sign else 1
    if left_sign == 0:
        return 0
    if left_exponent != right_exponent:
        magnitude = -1 if left_exponent < right_exponent else 1
    else:
        width = max(len(left_digits), len(right_digits))
        a, b = left_digits.ljust(width, "0"), right_digits.ljust(width, "0")
        magnitude = (a > b) - (a < b)
    return magnitude * left_sign


def _comparable(value: object) -> bool:
    """A number a bound or an ``in`` list may hold: its exponent short enough to be exact."""
    if isinstance(value, JSONNumber):
        found = _NUMBER_TEXT.fullmatch(value.text)
        if found is None:
            return False
        exponent = (found.group(4) or "0").lstrip("+-").lstrip("0")
        return len(exponent) <= MAX_EXPONENT_DIGITS
    return True


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, bool)) or is_number(value)


def check_constraint(name: str, value: object, *, allow_same: bool) -> Constraint:
    """``value`` as a constraint on argument ``name``; :class:`ScopeError` saying why not."""
    if value == SAME and isinstance(value, str):
        if not allow_same:
            raise ScopeError(
                f"{name}: 'same' needs a request to be the same as (a rules file may not use it)"
            )
        return SAME
    if value == ANY and isinstance(value, str):
        return ANY
    if not isinstance(value, Mapping) or not value:
        raise ScopeError(
            f"{name}: a constraint is 'same', 'any', {{min, max}}, {{in}} or {{prefix}}"
        )
    keys = set(value)
    if keys <= {"min", "max"}:
        bounds: dict[str, Any] = {}
        for key in ("min", "max"):
            if key in value:
                bound = value[key]
                if not is_number(bound):
                    raise ScopeError(f"{name}: {key} must be a number (not true/false)")
                if not _comparable(bound):
                    raise ScopeError(
                        f"{name}: {key}'s exponent has more than {MAX_EXPONENT_DIGITS} digits"
                    )
                bounds[key] = bound
        if (
            "min" in bounds
            and "max" in bounds
            and compare_numbers(bounds["min"], bounds["max"]) > 0
        ):
            raise ScopeError(f"{name}: min is greater than max")
        return bounds
    if keys == {"in"}:
        values = value["in"]
        if not isinstance(values, list) or not values:
            raise ScopeError(f"{name}: in must be a non-empty list")
        if len(values) > MAX_IN:
            raise ScopeError(f"{name}: in may list at most {MAX_IN} values")
        for one in values:
            if (
                not _scalar(one)
                or (isinstance(one, str) and len(one) > MAX_TEXT)
                or not _comparable(one)
            ):
                raise ScopeError(
                    f"{name}: in lists strings, numbers, true, false or null (no tables or lists)"
                )
        return {"in": list(values)}
    if keys == {"prefix"}:
        prefix = value["prefix"]
        if not isinstance(prefix, str) or not prefix or len(prefix) > MAX_TEXT:
            raise ScopeError(f"{name}: prefix must be a non-empty string")
        return {"prefix": prefix}
    unknown = sorted(keys - {"min", "max", "in", "prefix"})
    raise ScopeError(
        f"{name}: unknown constraint key {unknown[0]!r} "
        "(min and max, in, or prefix, one kind per argument)"
        if unknown
        else f"{name}: one kind of constraint per argument (min and max, in, or prefix)"
    )


def check_match(
    match: object, *, arguments: Mapping[str, Any] | None, allow_same: bool
) -> dict[str, Constraint]:
    """A whole ``match`` object, checked; for a grant, against its request's ``arguments``.

    For a grant (``arguments`` given) every argument gets a constraint, ``"same"``
    where the match names none, and a match may name only the request's
    arguments; a redacted argument may be only ``"same"`` or ``"any"``.
    """
    if match is None:
        match = {}
    if not isinstance(match, Mapping):
        raise ScopeError("match must be an object of argument names to constraints")
    out: dict[str, Constraint] = {}
    for name, value in match.items():
        if not isinstance(name, str):
            raise ScopeError("match keys are argument names")
        if arguments is not None and name not in arguments:
            raise ScopeError(f"{name}: the request has no such argument")
        constraint = check_constraint(name, value, allow_same=allow_same)
        if (
            arguments is not None
            and constraint not in (SAME, ANY)
            and holds_marker_key(arguments[name])
        ):
            raise ScopeError(
                f"{name}: a redacted argument can only be 'same' (by its digest) or 'any'"
            )
        out[name] = constraint
    if arguments is not None:
        for name in arguments:
            out.setdefault(name, SAME)
        return {name: out[name] for name in sorted(out)}
    return out


def satisfies(constraint: Constraint, value: object, granted: object = None) -> bool:
    """Whether ``value`` meets ``constraint`` (``granted``: the value ``"same"`` means)."""
    if constraint == ANY:
        return True
    if constraint == SAME:
        return canonical_json(value) == canonical_json(granted)
    if "in" in constraint:
        return any(_same_scalar(value, one) for one in constraint["in"])
    if "prefix" in constraint:
        return isinstance(value, str) and value.startswith(constraint["prefix"])
    if not is_number(value):
        return False
    bounds = [constraint[key] for key in ("min", "max") if key in constraint]
    if all(is_integer(bound) for bound in bounds) and not is_integer(value):
        return False
    if "min" in constraint and compare_numbers(value, constraint["min"]) < 0:
        return False
    return not ("max" in constraint and compare_numbers(value, constraint["max"]) > 0)


def _same_scalar(value: object, listed: object) -> bool:
    if is_number(listed):
        if not is_number(value):
            return False
        # An integer listed covers only that integer written as one.
        if is_integer(listed) != is_integer(value):
            return False
        return compare_numbers(value, listed) == 0
    if isinstance(listed, bool) or listed is None:
        return value is listed
    return isinstance(value, str) and value == listed


def covers(
    match: Mapping[str, Constraint],
    arguments: Mapping[str, Any],
    *,
    granted: Mapping[str, Any] | None,
) -> bool:
    """Whether a request's ``arguments`` fall inside ``match``.

    For a grant (``granted``: its request's arguments) the names must be exactly
    the granted ones, none added and none missing; for a rules file's auto-decision
    an argument the match does not name is unconstrained, and one it names must be there.
    """
    if granted is not None and set(arguments) != set(granted):
        return False
    for name, constraint in match.items():
        if name not in arguments:
            return False
        if not satisfies(constraint, arguments[name], None if granted is None else granted[name]):
            return False
    return True


def describe(match: Mapping[str, Constraint], granted: Mapping[str, Any] | None) -> list[str]:
    """The scope in words, one line per argument (for the CLI, Slack and the page)."""
    lines = []
    for name, constraint in match.items():
        if constraint == SAME:
            shown = "its value" if granted is None else canonical_json(granted.get(name))
            if granted is not None and holds_marker_key(granted.get(name)):
                shown = "the same redacted value"
            lines.append(f"{name} is exactly {shown}")
        elif constraint == ANY:
            lines.append(f"{name} may be anything")
        elif "in" in constraint:
            lines.append(
                f"{name} is one of " + ", ".join(canonical_json(one) for one in constraint["in"])
            )
        elif "prefix" in constraint:
            lines.append(f"{name} starts with {canonical_json(constraint['prefix'])}")
        else:
            kind = (
                "a whole number"
                if all(is_integer(constraint[k]) for k in ("min", "max") if k in constraint)
                else "a number"
            )
            low = constraint.get("min")
            high = constraint.get("max")
            if low is not None and high is not None:
                lines.append(f"{name} is {kind} from {low} to {high}")
            elif low is not None:
                lines.append(f"{name} is {kind} of at least {low}")
            else:
                lines.append(f"{name} is {kind} of at most {high}")
    return lines
