"""Showing text from a model to a person: every character that could hide or mislead, escaped.

Tool names, arguments and notes come from a model or a provider. Shown as they
are, a bidi override (U+202E) makes an argument read backwards, a zero-width
space makes two different values look the same, and a terminal escape
rewrites the screen. :func:`escape` shows each such character as ``\\uXXXX``
(``\\UXXXXXXXX`` beyond the BMP, so the escape cannot run into the next
character), the same way wherever a reviewer looks (the review page, the CLI)::

    >>> escape("pay\\u202eusd")
    'pay\\\\u202eusd'

A character is escaped when Python does not call it printable (categories Cc,
Cf, Cs, Co, Cn, Zl, Zp and every Zs but the plain space: controls, bidi marks
and overrides, zero-width characters, U+FEFF, unassigned code points) or when
it is one of the few printable-by-category characters that draw nothing
(Hangul fillers, the braille blank, the combining grapheme joiner, variation
selectors).

A guard's redaction marker, ``{"$redacted": "1a2b3c4d5e6f"}``, is shown as
``\u2039redacted 1a2b3c4d5e6f\u203a`` (:func:`with_markers_shown`), so that a
reviewer reads "a secret is here" rather than an object with an odd key; only
where the create said it redacted that place (API 1.3's ``redacted``), since
anything else shaped like a marker is what the tool will get.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

from approval_guard._codec.exact_json import JSONNumber
from approval_guard._codec.marker import DIGEST_LENGTH, REDACTED_KEY

# Letters and symbols by category that render as nothing; Python calls them printable.
_BLANK = frozenset(
    {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164}
    | {0xFFA0}
    | set(range(0xFE00, 0xFE10))
    | set(range(0xE0100, 0xE01F0))
)


def is_hidden(char: str) -> bool:
    """True for a character that must be shown escaped (see the module docstring)."""
    return not char.isprintable() or ord(char) in _BLANK


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# The plain-ASCII fast path: most text has nothing to escape but might have controls.
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def escape(text: str) -> str:
    """``text`` with every hidden character written as ``\\uXXXX`` / ``\\UXXXXXXXX``."""
    if text.isascii():
        return _ASCII_CONTROL.sub(lambda match: _escaped(match.group()), text)
    return "".join(_escaped(char) if is_hidden(char) else char for char in text)


def escape_lines(text: str) -> str:
    """Like :func:`escape`, but ``"\\n"`` stays a line break (for pretty-printed JSON)."""
    return "\n".join(escape(line) for line in text.split("\n"))


# A guard writes the digest as lowercase hex; anything else is not its marker.
_MARKER_DIGEST = re.compile(f"[0-9a-f]{{{DIGEST_LENGTH}}}")


def redaction_digest(value: object) -> str | None:
    """The digest of a guard's redaction marker ``{"$redacted": "<12 hex>"}``, else None.

    Only that exact shape is a marker (one key, 12 lowercase hex digits);
    anything else is shown as the JSON it is.
    """
    if isinstance(value, dict) and len(value) == 1:
        digest = value.get(REDACTED_KEY)
        if isinstance(digest, str) and _MARKER_DIGEST.fullmatch(digest):
            return digest
    return None


def marker_text(digest: str) -> str:
    """How a marker reads: ``\u2039redacted 1a2b3c4d5e6f\u203a``."""
    return f"\u2039redacted {digest}\u203a"


def pointer(parts: Sequence[str | int]) -> str:
    """The JSON Pointer (RFC 6901) of a place in the arguments: ``/card/number``, ``/cards/0``."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def with_markers_shown(
    value: Any,
    redacted: Collection[str],
    *,
    at: str = "",
    found: list[str] | None = None,
) -> Any:
    """``value`` with each marker the create said it redacted replaced by its :func:`marker_text`.

    ``redacted`` holds the JSON Pointers (API 1.3's create field ``redacted``) of
    the places in the arguments where the guard put a marker; ``at`` is the
    pointer of ``value`` itself in the arguments (``""`` for the whole object,
    ``/card`` for one argument). A marker anywhere else was sent as it is
    (by a client, not a guard's redaction) and is left as the JSON it is: the
    tool gets exactly that object, so the reviewer must see it.

    The replacement is a :class:`~approval_guard._codec.exact_json.JSONNumber`, so
    ``dump_json`` writes it verbatim, without quotes: it is not JSON at all, so
    no string a model sends can look like it. ``found`` (if given) gets each
    shown marker's path, ``card.number`` or ``cards[0].number``. The input is
    not changed.
    """
    if not redacted:
        return value
    out = [] if found is None else found
    return _shown(value, at, "", frozenset(redacted), out)


def redacted_paths(value: Any, redacted: Collection[str], *, at: str = "") -> list[str]:
    """Where ``value`` holds markers listed in ``redacted``: ``["api_key", "card.number"]``.

    ``[""]`` if ``value`` is one (see :func:`with_markers_shown` for ``at``).
    """
    found: list[str] = []
    with_markers_shown(value, redacted, at=at, found=found)
    return found


def _shown(value: Any, at: str, path: str, redacted: frozenset[str], found: list[str]) -> Any:
    if at in redacted:
        digest = redaction_digest(value)
        if digest is not None:
            found.append(path)
            return JSONNumber(marker_text(digest))
    if isinstance(value, dict):
        return {
            key: _shown(
                item, at + pointer((key,)), f"{path}.{key}" if path else key, redacted, found
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _shown(item, f"{at}/{i}", f"{path}[{i}]", redacted, found)
            for i, item in enumerate(value)
        ]
    return value


def markers_at(value: Any) -> list[str]:
    """The JSON Pointers of every marker in ``value`` (what a guard lists as ``redacted``)."""
    found: list[str] = []
    _find(value, "", found)
    return found


def _find(value: Any, at: str, found: list[str]) -> None:
    # Runs on every redacted call's arguments: the marker test inline, no pointer
    # escaped unless it must be, scalars never visited.
    if isinstance(value, dict):
        if len(value) == 1 and REDACTED_KEY in value:
            digest = value[REDACTED_KEY]
            if type(digest) is str and _MARKER_DIGEST.fullmatch(digest):
                found.append(at)
                return
        for key, item in value.items():
            if isinstance(item, _NESTED):
                step = key if "~" not in key and "/" not in key else pointer((key,))[1:]
                _find(item, f"{at}/{step}", found)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, _NESTED):
                _find(item, f"{at}/{i}", found)


_NESTED = (dict, list)


__all__ = [
    "escape",
    "escape_lines",
    "is_hidden",
    "marker_text",
    "markers_at",
    "pointer",
    "redacted_paths",
    "redaction_digest",
    "with_markers_shown",
]
