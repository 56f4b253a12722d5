"""load_json keeps as text only the numbers Python would rewrite; the rest are int and float."""

from __future__ import annotations

from approval_guard._codec.exact_json import JSONNumber, load_json


def test_exact_numbers_parse_to_plain_python_numbers_when_they_can() -> None:
    """Only numbers Python would rewrite are kept as text; the rest are int and float."""
    assert {"a": 1, "b": 0.5, "c": JSONNumber("1e400"), "d": JSONNumber("-0")} == load_json(
        '{"a":1,"b":0.5,"c":1e400,"d":-0}'
    )
