"""The wire's parsers are strict, total and bounded: any input gives a value, None or WireError."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approval_guard._call.backoff import MAX_RETRY_AFTER, parse_retry_after
from approval_guard._codec.wire import (
    MESSAGE_LIMIT,
    WireError,
    format_http_date,
    parse_error,
    parse_http_date,
    parse_request,
    parse_timestamp,
)
from approval_guard._transport.answer import TransportError
from approval_guard._transport.scrub import safe_text, scrub_text

NOW = datetime(2026, 9, 16, 12, 0, 0, tzinfo=timezone.utc)
MOMENTS = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9998, 12, 31, 23, 59, 59)
).map(lambda moment: moment.replace(tzinfo=timezone.utc))
NEAR_TIMESTAMPS = st.from_regex(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{0,12})?"
    r"([Zz]|[+-][0-9]{2}:?[0-9]{2})?",
    fullmatch=True,
)
NEAR_DATES = st.from_regex(
    r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Dec) [0-9]{4} "
    r"[0-9]{2}:[0-9]{2}:[0-9]{2} (GMT|UTC|[+-][0-9]{4})",
    fullmatch=True,
)


def _in_range(moment: datetime) -> bool:
    return moment.tzinfo is timezone.utc and 1970 <= moment.year <= 9998


# -- HTTP dates -----------------------------------------------------------------


@given(st.one_of(st.text(), NEAR_DATES, st.none()))
def test_parse_http_date_never_raises(value: str | None) -> None:
    """Any header text gives None or a UTC moment in 1970..9998."""
    moment = parse_http_date(value)
    assert moment is None or _in_range(moment)


@given(MOMENTS)
def test_http_dates_round_trip(moment: datetime) -> None:
    """An IMF-fixdate we write reads back as the same second; its asctime form too."""
    whole = moment.replace(microsecond=0)
    assert whole == parse_http_date(format_http_date(moment))
    assert whole == parse_http_date(
        whole.strftime("%a %b ") + f"{whole.day:2d}" + whole.strftime(" %H:%M:%S %Y")
    )


@pytest.mark.parametrize(
    "value",
    [
        "Fri, 31 Dec 9999 23:59:59 -2359",  # overflows when converted
        "Fri, 31 Dec 9999 23:59:59 GMT",  # leaves no room to add hours
        "Wed, 31 Dec 1969 23:59:59 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",  # a two-digit year would be a guess
        "Sunday, 06-Nov-94 08:49:37 GMT",  # rfc850: always a two-digit year
        "Sun, 06 Nov 1994 08:49:37 +0000",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 gmt",
        "Mon, 06 Nov 1994 08:49:37 GMT",  # the weekday does not match
        "Sun, 06 Nov 1994 08:49:60 GMT",  # a leap second
        "Sun, 31 Nov 1994 08:49:37 GMT",
        "Sun,  6 Nov 1994 08:49:37 GMT",
        "Sun, \u0660\u0666 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT",
        "",
        "1994-11-06T08:49:37Z",
    ],
)
def test_parse_http_date_refuses_what_rfc_9110_does_not_define(value: str) -> None:
    """Only IMF-fixdate and asctime, GMT, a real date with its weekday, years 1970..9998."""
    assert parse_http_date(value) is None


@pytest.mark.parametrize(
    "value",
    [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        " Sun, 06 Nov 1994 08:49:37 GMT ",
    ],
)
def test_parse_http_date_reads_rfc_9110_forms(value: str) -> None:
    """IMF-fixdate and asctime (with optional surrounding blanks) read as the same moment."""
    assert datetime(1994, 11, 6, 8, 49, 37, tzinfo=timezone.utc) == parse_http_date(value)


# -- Retry-After ----------------------------------------------------------------


@given(st.one_of(st.text(), NEAR_DATES, st.from_regex(r"[0-9]{1,40}", fullmatch=True)))
def test_parse_retry_after_never_raises(value: str) -> None:
    """Any header text gives None or a delay between 0 and a day."""
    delay = parse_retry_after(value, NOW, NOW)
    assert delay is None or 0.0 <= delay <= MAX_RETRY_AFTER


@pytest.mark.parametrize(
    ("expected", "value"),
    [
        (0.0, "0"),
        (120.0, "120"),
        (7.0, " 7 "),
        (5.0, "00000000000000000005"),
        (MAX_RETRY_AFTER, "86401"),
        (MAX_RETRY_AFTER, "9" * 40),
        (30.0, format_http_date(NOW + timedelta(seconds=30))),
        (0.0, format_http_date(NOW - timedelta(seconds=30))),
        (None, "\u00b2"),
        (None, "\u00b9\u00b2\u00b3"),
        (None, "\u0661\u0662"),
        (None, "1.5"),
        (None, "-1"),
        (None, "+5"),
        (None, "1e3"),
        (None, "Fri, 31 Dec 9999 23:59:59 -2359"),
        (None, ""),
        (None, None),
    ],
)
def test_parse_retry_after_reads_only_delay_seconds_or_an_http_date(
    expected: float | None, value: str | None
) -> None:
    """ASCII delay-seconds (capped at a day) or an HTTP-date; anything else is absent."""
    assert expected == parse_retry_after(value, NOW, NOW)


# -- RFC 3339 timestamps ----------------------------------------------------------


@given(st.one_of(st.text(), NEAR_TIMESTAMPS, st.integers(), st.none(), st.floats()))
def test_parse_timestamp_gives_a_utc_moment_or_a_wire_error(value: Any) -> None:
    """Any value parses to an aware UTC moment in 1970..9998 that round-trips, or is WireError."""
    try:
        moment = parse_timestamp(value, field="t")
    except WireError as exc:
        assert len(str(exc)) <= MESSAGE_LIMIT + 3 and str(exc).isprintable()
        return
    assert _in_range(moment)
    assert moment == parse_timestamp(moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), field="t")


@given(
    MOMENTS,
    st.integers(min_value=0, max_value=999_999),
    st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59),
    st.sampled_from(["T", "t"]),
    st.sampled_from(["", "3", "6", "9"]),
)
def test_parse_timestamp_reads_every_rfc_3339_form(
    moment: datetime, micro: int, offset_minutes: int, sep: str, digits: str
) -> None:
    """Any offset, T or t, a fraction of any length (truncated to µs): the instant written."""
    moment = moment.replace(microsecond=micro)
    zone = timezone(timedelta(minutes=offset_minutes))
    local = moment.astimezone(zone)
    if not 1970 <= local.year <= 9998:
        return
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    fraction = f".{local.microsecond:06d}999"[: 1 + int(digits)] if digits else ""
    text = f"{local:%Y-%m-%d}{sep}{local:%H:%M:%S}{fraction}{sign}{hours:02d}:{minutes:02d}"
    kept = int((fraction[1:] + "000000")[:6]) if fraction else 0
    assert moment.replace(microsecond=kept) == parse_timestamp(text, field="t")


@pytest.mark.parametrize(
    ("expected", "text"),
    [
        (datetime(2026, 9, 16, 12, tzinfo=timezone.utc), "2026-09-16T12:00:00Z"),
        (datetime(2026, 9, 16, 12, tzinfo=timezone.utc), "2026-09-16t12:00:00z"),
        (datetime(2026, 9, 16, 12, tzinfo=timezone.utc), "2026-09-16T14:00:00+02:00"),
        (datetime(2026, 9, 16, 12, tzinfo=timezone.utc), "2026-09-16T12:00:00-00:00"),
        (datetime(2026, 9, 16, 12, 0, 0, 100000, tzinfo=timezone.utc), "2026-09-16T12:00:00.1Z"),
        # Truncated, never rounded up: an expires_at never comes out later than written.
        (
            datetime(2026, 9, 16, 12, 0, 0, 999999, tzinfo=timezone.utc),
            "2026-09-16T12:00:00.9999999999Z",
        ),
        (datetime(1970, 1, 1, tzinfo=timezone.utc), "1970-01-01T00:00:00Z"),
    ],
)
def test_parse_timestamp_reads_rfc_3339(expected: datetime, text: str) -> None:
    """RFC 3339 date-times, whatever their offset or fraction, read as the instant written."""
    assert expected == parse_timestamp(text, field="t")


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-16T12Z",
        "2026-09-16T12:00Z",
        "20260916T120000Z",
        "2026-W38-3T12:00:00Z",
        "2026-259T12:00:00Z",
        "2026-09-16 12:00:00Z",
        "2026-09-16T12:00:00",
        "2026-09-16T12:00:00+0200",
        "2026-09-16T12:00:00+02",
        "2026-09-16T12:00:00+24:00",
        "2026-09-16T12:00:00.Z",
        "2026-09-16T12:00:00,5Z",
        "2026-09-16T12:00:60Z",  # a leap second: fail closed
        "2026-09-31T12:00:00Z",
        "1969-12-31T23:59:59Z",
        "1970-01-01T00:30:00+01:00",  # 1969 in UTC
        "9999-12-31T23:59:59-01:00",  # overflows
        "9999-01-01T00:00:00Z",  # leaves no room to add hours
        "\uff12026-09-16T12:00:00Z",
        "2026-09-16T12:00:00Z\n",
        " 2026-09-16T12:00:00Z",
        "",
    ],
)
def test_parse_timestamp_refuses_what_is_not_rfc_3339(text: str) -> None:
    """Other ISO 8601 forms, leap seconds, years outside 1970..9998: WireError."""
    with pytest.raises(WireError):
        parse_timestamp(text, field="t")


# -- messages quoting provider text ---------------------------------------------


@given(st.text(), st.integers(min_value=1, max_value=600))
def test_safe_text_is_bounded_and_printable(text: str, limit: int) -> None:
    """Whatever a provider wrote, what is quoted is at most ``limit`` (+ "...") and printable."""
    out = safe_text(text, limit)
    assert len(out) <= limit + 3
    assert out.isprintable()


@pytest.mark.parametrize(
    ("expected", "text"),
    [
        ("Authorization: *** was refused", "Authorization: Bearer abc.DEF-123 was refused"),
        ("{'authorization': '***'}", "{'authorization': 'Bearer agi_secret_1'}"),
        ('{"token": "***"}', '{"token": "s3cr3t"}'),
        ("password=***&next=1", "password=hunter2&next=1"),
        ("got Bearer *** back", "got Bearer agi_secret_token_123 back"),
        ("Basic ***", "Basic dXNlcjpwYXNz"),
        ("Token provided was checked", "Token provided was checked"),
        ("Basic authentication is not supported", "Basic authentication is not supported"),
        ('Bearer realm="api"', 'Bearer realm="api"'),
    ],
)
def test_scrub_text_removes_what_is_shaped_like_a_secret(expected: str, text: str) -> None:
    """Authorization values and credential-shaped tokens go; ordinary words stay."""
    assert expected == scrub_text(text)


def test_wire_and_transport_errors_are_bounded_and_printable() -> None:
    """A megabyte of provider text with control characters never becomes a megabyte message."""
    text = "\x1b[31m" + "x" * 1_000_000 + "\n\x00"
    for message in (str(WireError(text)), TransportError("garbage", text).message):
        assert len(message) <= MESSAGE_LIMIT + 3
        assert message.isprintable()


def test_an_error_body_is_quoted_bounded_and_scrubbed() -> None:
    """parse_error's type and message are short, printable and free of Authorization values."""
    body = {
        "error": {"type": "t\x00" * 1000, "message": "Authorization: Bearer x1y2z3w4v5\n" * 10**5}
    }
    parsed = parse_error(body)
    assert parsed is not None
    kind, message = parsed
    assert len(kind) < 100 and kind.isprintable()
    assert len(message) <= MESSAGE_LIMIT + 3 and message.isprintable()
    assert "x1y2z3w4v5" not in message


def _request(**fields: Any) -> dict[str, Any]:
    return {
        "id": "7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71",
        "tool": "issue_refund",
        "arguments": {},
        "timeout": "30m",
        "status": "pending",
        "created_at": "2026-09-16T12:00:00Z",
        "deadline_at": "2026-09-16T12:30:00Z",
        **fields,
    }


@pytest.mark.parametrize("request_id", ["", "a b", "id\n", "id\x1b[2J", "x" * 201])
def test_a_request_id_that_is_not_a_plain_identifier_is_refused(request_id: str) -> None:
    """An id goes into URLs, logs and outcomes: empty, spaced, control or huge is WireError."""
    with pytest.raises(WireError):
        parse_request(_request(id=request_id))


def test_an_unknown_status_is_kept_bounded_and_printable() -> None:
    """An unknown status is quoted in the outcome: it comes out short and printable."""
    status = parse_request(_request(status="\x1b" + "s" * 10**5)).status
    assert len(status) < 100 and status.isprintable()
