"""RFC 3339 timestamps or nothing: every offset and fraction read as the instant written;
other ISO 8601 forms refused, and an approval that uses them does not run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec import wire as _wire
from approval_guard._codec.wire import (
    MESSAGE_LIMIT,
    WireError,
    format_timestamp,
    parse_timestamp,
)
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard, refund_tool
from tests.support.moments import MOMENTS, NEAR_TIMESTAMPS, in_range
from tests.support.scripted import Reply, ScriptedServer, rewriting_proxy


@given(st.one_of(st.text(), NEAR_TIMESTAMPS, st.integers(), st.none(), st.floats()))
def test_parse_timestamp_gives_a_utc_moment_or_a_wire_error(value: Any) -> None:
    """Any value parses to an aware UTC moment in 1970..9998 that round-trips, or is WireError."""
    try:
        moment = parse_timestamp(value, field="t")
    except WireError as exc:
        assert len(str(exc)) <= MESSAGE_LIMIT + 3 and str(exc).isprintable()
        return
    assert in_range(moment)
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


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31), timezones=st.none()
    ),
    st.sampled_from(
        ["%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ", "ms", "%Y-%m-%dT%H:%M:%S+02:00"]
    ),
)
def test_timestamp_parsing_agrees_with_rfc3339(moment: datetime, form: str) -> None:
    """The fast path and the general parser read every RFC 3339 form the same way."""
    from dateutil.parser import isoparse

    from approval_guard._codec.wire import parse_timestamp

    text = (
        moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        if (form == "ms")
        else moment.strftime(form)
    )
    assert isoparse(text).astimezone(timezone.utc) == parse_timestamp(text, field="t")


def _week_date(moment: datetime) -> str:
    year, week, day = moment.isocalendar()
    return f"{year}-W{week:02d}-{day}T{moment:%H:%M:%S}Z"


# From the hardening pass, item 15: timestamps are RFC 3339 or nothing.
@pytest.mark.parametrize(
    "spell",
    [
        _week_date,
        lambda moment: f"{moment:%Y%m%dT%H%M%S}Z",
        lambda moment: f"{moment + timedelta(hours=1):%Y-%m-%dT%H}Z",
        lambda moment: f"{moment:%Y-%m-%d %H:%M:%S}Z",
        lambda moment: f"{moment:%Y-%j}T{moment:%H:%M:%S}Z",
        lambda moment: f"{moment:%Y-%m-%dT%H:%M}:60Z",
    ],
    ids=["week_date", "basic_format", "hour_only", "space", "ordinal_date", "leap_second"],
)
def test_an_approval_whose_expiry_is_not_rfc_3339_does_not_run(
    approving: LocalProvider, servers: list[ScriptedServer], spell: Callable[[datetime], str]
) -> None:
    """An expires_at in another ISO 8601 form (or a leap second) is unreadable: no run."""

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        try:
            body = json.loads(reply.body)
        except ValueError:
            return reply
        decision = body.get("decision") if isinstance(body, dict) else None
        if isinstance(decision, dict) and decision.get("expires_at"):
            later = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(minutes=5)
            decision["expires_at"] = spell(later)
            reply.body = json.dumps(body).encode()
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    out = refund_tool(make_guard(approving, base_url=url), ran)("p_1", 1)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert "expires_at" in str(out)
    assert [] == ran


# From the hardening pass, item 15: timestamps are RFC 3339 or nothing.
def test_an_approval_with_any_rfc_3339_offset_and_long_fraction_runs(
    approving: LocalProvider, servers: list[ScriptedServer]
) -> None:
    """Lower-case t/z, an offset and a nanosecond fraction are RFC 3339: the approval runs."""

    # One decision, written the same way in every answer (the guard reads it again
    # before running: two answers a second apart must not look like two decisions).
    later = datetime.now(timezone(timedelta(hours=-5))) + timedelta(minutes=5)
    expires_at = f"{later:%Y-%m-%dt%H:%M:%S}.123456789-05:00"
    decided_at = format_timestamp(datetime.now(timezone.utc)).lower()

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        body = json.loads(reply.body) if reply.body else None
        decision = body.get("decision") if isinstance(body, dict) else None
        if isinstance(decision, dict) and decision.get("expires_at"):
            decision["expires_at"] = expires_at
            decision["decided_at"] = decided_at
            reply.body = json.dumps(body).encode()
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(
        make_guard(approving, base_url=url), ran
    )("p_1", 1)


def test_a_timestamp_read_again_is_the_same_moment_and_the_kept_ones_stay_bounded() -> None:
    """A timestamp already read gives the same moment; at most _MAX_PARSED are kept."""
    first = parse_timestamp("2026-09-16T12:05:00Z", field="expires_at")
    assert datetime(2026, 9, 16, 12, 5, tzinfo=timezone.utc) == first
    assert first == parse_timestamp("2026-09-16T12:05:00Z", field="expires_at")
    for second in range(_wire._MAX_PARSED + 10):
        parse_timestamp(
            f"2026-09-16T12:{second // 60 % 60:02d}:{second % 60:02d}.{second:06d}Z", field="x"
        )
    assert len(_wire._PARSED) <= _wire._MAX_PARSED


@pytest.mark.parametrize("text", ["2026-02-30T12:05:00Z", "0001-01-01T00:00:00Z"])
def test_a_refused_timestamp_is_refused_every_time(text: str) -> None:
    """What is refused once is refused again: no refusal is kept as a moment."""
    for _ in range(2):
        with pytest.raises(WireError):
            parse_timestamp(text, field="expires_at")
