"""escape(): controls, bidi marks and invisible characters written as \\u escapes, and only
those, so a reviewer sees what is really there.
"""

from __future__ import annotations

import pytest

from approval_guard._codec.display import escape


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain ascii", "plain ascii"),
        ("tab\there", "tab\\u0009here"),
        ("esc\x1b[2J", "esc\\u001b[2J"),
        ("del\x7f", "del\\u007f"),
        ("bidi\u202a\u202b\u202c\u202d\u202e", "bidi\\u202a\\u202b\\u202c\\u202d\\u202e"),
        ("iso\u2066\u2067\u2068\u2069", "iso\\u2066\\u2067\\u2068\\u2069"),
        ("mark\u200e\u200f\u061c", "mark\\u200e\\u200f\\u061c"),
        ("zw\u200b\u200c\u200d\u2060\ufeff", "zw\\u200b\\u200c\\u200d\\u2060\\ufeff"),
        ("lines\u2028\u2029", "lines\\u2028\\u2029"),
        ("nbsp\u00a0", "nbsp\\u00a0"),
        ("filler\u3164\u115f", "filler\\u3164\\u115f"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("café 💶 €", "café 💶 €"),
    ],
)
def test_display_escapes_every_hidden_character(text: str, shown: str) -> None:
    """escape() writes controls, bidi marks and invisible characters as \\u escapes, only those."""
    assert shown == escape(text)
