"""HTTP dates (RFC 9110): IMF-fixdate and asctime, GMT, years 1970..9998, or no date at all;
an approval whose Date header is anything else cannot run.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.wire import (
    epoch_second,
    format_http_date,
    parse_http_date,
)
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard, refund_tool
from tests.support.moments import MOMENTS, NEAR_DATES, in_range
from tests.support.scripted import Reply, ScriptedServer, rewriting_proxy, set_header


@given(st.one_of(st.text(), NEAR_DATES, st.none()))
def test_parse_http_date_never_raises(value: str | None) -> None:
    """Any header text gives None or a UTC moment in 1970..9998."""
    moment = parse_http_date(value)
    assert moment is None or in_range(moment)


@given(MOMENTS)
def test_http_dates_round_trip(moment: datetime) -> None:
    """An IMF-fixdate we write reads back as the same second; its asctime form too."""
    whole = moment.replace(microsecond=0)
    assert whole == parse_http_date(format_http_date(moment))
    assert whole == parse_http_date(
        whole.strftime("%a %b ") + f"{whole.day:2d}" + whole.strftime(" %H:%M:%S %Y")
    )


def test_a_moment_in_a_seconds_last_microseconds_is_written_as_that_second() -> None:
    """The float of ``timestamp()`` rounds 3059-01-01 00:00:00.999997 up; the Date does not."""
    moment = datetime(3059, 1, 1, 0, 0, 0, 999997, tzinfo=timezone.utc)
    assert "Sat, 01 Jan 3059 00:00:00 GMT" == format_http_date(moment)
    assert epoch_second(moment) == epoch_second(moment.replace(microsecond=0))
    assert -1 == epoch_second(datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=timezone.utc))


def test_http_dates_either_side_of_1970_are_each_their_own_second() -> None:
    """Moments written one after another near 1970 each get their own second's text."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    for seconds in (-2.5, -1.5, -1.0, -0.5, 0.0, 0.5, 1.5, -0.5):
        moment = epoch + timedelta(seconds=seconds)
        expected = email.utils.format_datetime(moment.replace(microsecond=0), usegmt=True)
        assert expected == format_http_date(moment), seconds


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


def _two_digit_year(date: str) -> str:
    moment = datetime.strptime(date, "%a, %d %b %Y %H:%M:%S GMT")
    return moment.strftime("%a, %d %b %y %H:%M:%S GMT")


def _rfc850(date: str) -> str:
    moment = datetime.strptime(date, "%a, %d %b %Y %H:%M:%S GMT")
    return moment.strftime("%A, %d-%b-%y %H:%M:%S GMT")


# From the hardening pass, item 2: headers are parsed strictly and never raise.
@pytest.mark.parametrize(
    "bad_date",
    [
        lambda date: "Fri, 31 Dec 9999 23:59:59 -2359",
        lambda date: "Mon, 01 Jan 0001 00:00:00 +2359",
        _two_digit_year,
        _rfc850,
        lambda date: date.replace("GMT", "+0000"),
        lambda date: date.replace("GMT", "-0100"),
    ],
    ids=["overflow", "underflow", "two_digit_year", "rfc850", "numeric_zone", "other_zone"],
)
def test_an_approval_whose_date_header_is_not_an_http_date_does_not_run(
    approving: LocalProvider, servers: list[ScriptedServer], bad_date: Callable[[str], str]
) -> None:
    """A Date that is not RFC 9110's (or would overflow) is no Date: the approval cannot run."""

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        date = next(v for k, v in reply.headers if k.lower() == "date")
        return set_header(reply, "Date", bad_date(date))

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    tool = refund_tool(make_guard(approving, base_url=url), ran)
    out = tool("p_1", 1)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert "Date" in str(out)
    assert [] == ran


def test_http_dates_of_two_seconds_either_side_of_1970_are_not_confused() -> None:
    """The second written last is remembered exactly: 23:59:59.5 of 1969 is not 1970's first."""
    after = datetime(1970, 1, 1, 0, 0, 0, 500000, tzinfo=timezone.utc)
    before = datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=timezone.utc)
    assert "Thu, 01 Jan 1970 00:00:00 GMT" == format_http_date(after)
    assert "Wed, 31 Dec 1969 23:59:59 GMT" == format_http_date(before)
