"""Exact JSON: numbers Python would rewrite are read as text; writing gives json's own text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approval_guard._codec.exact_json import InvalidJSON, JSONNumber, dump_json, load_json


def test_exact_numbers_parse_to_plain_python_numbers_when_they_can() -> None:
    """Only numbers Python would rewrite are kept as text; the rest are int and float."""
    assert {"a": 1, "b": 0.5, "c": JSONNumber("1e400"), "d": JSONNumber("-0")} == load_json(
        '{"a":1,"b":0.5,"c":1e400,"d":-0}'
    )


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(value=_JSON, sort_keys=st.booleans(), ensure_ascii=st.booleans())
def test_dump_json_writes_what_json_dumps_writes(
    value: Any, sort_keys: bool, ensure_ascii: bool
) -> None:
    """Without exact numbers, the compact writer gives json.dumps's text, byte for byte."""
    expected = json.dumps(
        value, sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=(",", ":")
    )
    assert expected == dump_json(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii)


def test_dump_json_refuses_a_cycle_and_then_writes_the_same_object_again() -> None:
    """A cycle is refused as json refuses it, and leaves nothing behind for the next call."""
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dump_json(loop)
    loop.pop()
    assert "[1]" == dump_json(loop)


def test_dump_json_after_an_exact_number_writes_plain_values_again() -> None:
    """An exact number takes the slow writer; the value after it is written as before."""
    assert '{"a":1e400}' == dump_json({"a": JSONNumber("1e400")})
    assert '{"a":[1,2.5,"x"]}' == dump_json({"a": [1, 2.5, "x"]})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {"a": {1, 2}}])
def test_dump_json_refuses_what_json_cannot_hold(bad: Any) -> None:
    """NaN, infinity and a set are refused, never written."""
    with pytest.raises((ValueError, TypeError)):
        dump_json(bad)


def test_load_json_refuses_a_byte_order_mark_saying_so() -> None:
    """A body starting with U+FEFF is refused with json.loads's reason, not "Expecting value"."""
    with pytest.raises(InvalidJSON, match="Unexpected UTF-8 BOM"):
        load_json('\ufeff{"a": 1}')
