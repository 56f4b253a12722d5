"""A framework's refusal of edited arguments, as an ``EditError`` that quotes no value.

A schema validator's own message may quote the input, whole (a redacted
secret among it) or in part; what reaches a log line and a ``NotRun`` is only
where and what kind of error it found.
"""

from __future__ import annotations

from typing import Any

from approval_guard._options.converters import EditError, clip

#: At most this many of the validator's errors are named.
MAX_ERRORS = 3


def refused_edit(exc: Exception) -> EditError:
    """``exc`` (a pydantic ``ValidationError`` or anything else) as a value-free EditError."""
    errors = _errors(exc)
    if not errors:
        return EditError(type(exc).__name__)
    shown = [_one(error) for error in errors[:MAX_ERRORS]]
    more = len(errors) - len(shown)
    tail = f" and {more} more" if more > 0 else ""
    return EditError("; ".join(shown) + tail)


def _errors(exc: Exception) -> list[dict[str, Any]]:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return []
    try:
        found = errors(include_input=False, include_url=False, include_context=False)
    except Exception:
        return []
    return [error for error in found if isinstance(error, dict)] if isinstance(found, list) else []


def _one(error: dict[str, Any]) -> str:
    loc = error.get("loc")
    where = ".".join(str(part) for part in loc) if isinstance(loc, (list, tuple)) else ""
    kind = error.get("type")
    what = kind if isinstance(kind, str) else "invalid"
    return clip(f"{where or 'arguments'}: {what}", 100)
