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
"""

from __future__ import annotations

import re

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


__all__ = ["escape", "escape_lines", "is_hidden"]
