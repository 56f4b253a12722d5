"""The one duration codec: wire durations, ages and time left, ASCII digits only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.duration import (
    canonical,
    check_duration_text,
    format_age,
    format_duration,
    format_time_left,
    parse_age,
    parse_duration_string,
    to_seconds,
    to_timedelta,
)

# Digits of other scripts: str.isdigit() and regex \d accept them, int() reads them.
FOREIGN_DIGITS = ["\u0661", "\u06f1", "\u0967", "\uff11", "\U0001d7cf"]


@pytest.mark.parametrize("digit", FOREIGN_DIGITS)
@pytest.mark.parametrize(
    "parse",
    [parse_duration_string, to_seconds, to_timedelta, parse_age],
    ids=["wire", "to_seconds", "to_timedelta", "age"],
)
def test_a_duration_with_a_non_ascii_digit_is_refused(parse: object, digit: str) -> None:
    """An Arabic-Indic '1h' is not a duration anywhere: only ASCII digits are read."""
    assert callable(parse)
    with pytest.raises(ValueError):
        parse(f"{digit}h")


@pytest.mark.parametrize("digit", FOREIGN_DIGITS)
def test_the_provider_refuses_a_timeout_with_a_non_ascii_digit(digit: str) -> None:
    """The server's field check refuses a non-ASCII '1m' as a malformed duration."""
    with pytest.raises(ValueError, match="'timeout': malformed duration"):
        check_duration_text(f"{digit}m", "'timeout'", 1, 86400)


@pytest.mark.parametrize(
    ("expected", "value"),
    [
        ("'timeout' must be a duration string such as '30m'", 30),
        ("'timeout': malformed duration '30 m'", "30 m"),
        ("'timeout' must be between 1s and 24h", "0s"),
        ("'timeout' must be between 1s and 24h", "25h"),
    ],
)
def test_check_duration_text_names_the_field_in_its_message(expected: str, value: object) -> None:
    """Each refusal starts with the field's name, as the API's error messages do."""
    with pytest.raises(ValueError) as info:
        check_duration_text(value, "'timeout'", 1, 86400)
    assert str(info.value).startswith(expected)


@pytest.mark.parametrize(
    ("expected", "seconds"),
    [
        ("deadline passed", 0),
        ("deadline passed", -5),
        ("deadline passed", 0.9),
        ("1s left", 1.9),
        ("59s left", 59),
        ("1m 00s left", 60),
        ("29m 54s left", 1794),
        ("1h 00m 00s left", 3600),
        ("1h 02m 05s left", 3725.5),
        ("24h 00m 00s left", 86400),
    ],
)
def test_format_time_left_writes_what_a_reviewer_reads(expected: str, seconds: float) -> None:
    """Whole seconds cut toward zero, hours then padded minutes and seconds."""
    assert expected == format_time_left(seconds)


@pytest.mark.parametrize(
    ("expected", "value"),
    [
        (timedelta(seconds=-30), -30),
        (timedelta(0), "0s"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(hours=2), timedelta(hours=2)),
    ],
)
def test_to_timedelta_allows_zero_and_negative(expected: timedelta, value: object) -> None:
    """A test's validity may be zero or negative, to make an already expired approval."""
    assert expected == to_timedelta(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, None, [1]])
def test_to_timedelta_refuses_what_is_not_a_duration(value: object) -> None:
    """A bool or another type is a TypeError naming the option."""
    with pytest.raises(TypeError, match="valid_for"):
        to_timedelta(value, name="valid_for")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "age", [timedelta(seconds=1), timedelta(days=3, minutes=7), timedelta(hours=25)]
)
def test_parse_age_reads_what_format_age_writes(age: timedelta) -> None:
    """format_age and parse_age are inverses on whole seconds."""
    assert age == parse_age(format_age(age))


@pytest.mark.parametrize("digit", FOREIGN_DIGITS)
def test_a_guard_refuses_a_harness_limit_with_a_non_ascii_digit(digit: str) -> None:
    """Guard(harness_limit=...) with a non-ASCII digit is a ConfigurationError at once."""
    with pytest.raises(ag.ConfigurationError, match="malformed duration"):
        ag.Guard(base_url="http://127.0.0.1:1", credential="c" * 20, harness_limit=f"{digit}h")


@pytest.mark.parametrize(
    ("expected", "value"),
    [
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("45s", 45),
        ("30m", "30m"),
        ("1m30s", "90s"),
        ("2h", "2h"),
        ("1h5s", "1h5s"),
        ("1m", 60.9),
    ],
)
def test_durations_are_sent_in_canonical_form(expected: str, value: Any) -> None:
    """Strings, timedeltas and seconds all become the API's canonical duration."""
    assert expected == canonical(value)


@pytest.mark.parametrize(
    "bad",
    [
        "0s",
        "-5s",
        "5",
        "m",
        "30m1h",
        "1h1h",
        "1d",
        "",
        " ",
        0,
        -1,
        timedelta(0),
        float("nan"),
        float("inf"),
        "1.5m",
    ],
)
def test_bad_durations_raise_value_error(bad: Any) -> None:
    """Zero, negative and malformed durations are refused."""
    with pytest.raises(ValueError):
        canonical(bad)


@given(st.integers(min_value=1, max_value=10 * 24 * 3600))
def test_duration_round_trip(seconds: int) -> None:
    """Any whole number of seconds survives formatting and parsing."""
    assert seconds == parse_duration_string(format_duration(seconds))
