"""Judging an approval by the provider's clock, known only from a Date: bounds never below
the provider's own timestamps, and no estimate at all at the ends of the calendar.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approval_guard._codec.clock import ClockSample, plausibly_expired, still_valid

T0 = datetime(2026, 9, 16, 12, 0, 0, tzinfo=timezone.utc)


# From the hardening pass, item 6: a stale Date.
@pytest.mark.parametrize("lag", [0.0, 5.0, 120.0, 86400.0])
def test_upper_bound_is_never_below_a_provider_timestamp(lag: float) -> None:
    """However far the Date lags decided_at, the bound is decided_at plus the time since sent."""
    decided = T0 + timedelta(seconds=30)
    sample = ClockSample(sent=10.0, received=10.2, date=decided - timedelta(seconds=lag))
    upper = sample.knowing(T0, decided).provider_now_upper(15.0)
    assert upper is not None and decided + timedelta(seconds=5.0) <= upper


# From the hardening pass, item 6: a stale Date.
@pytest.mark.parametrize(
    "date",
    [
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
        datetime.min.replace(tzinfo=timezone.utc),
    ],
)
def test_estimates_at_the_ends_of_the_calendar_fail_closed(date: datetime) -> None:
    """A Date at either end of the calendar: no estimate, no exception, not valid."""
    sample = ClockSample(sent=0.0, received=0.0, date=date).knowing(T0)
    expires = datetime(9999, 12, 31, tzinfo=timezone.utc)
    assert still_valid(expires, sample, 1e12)[0] is False
    assert plausibly_expired(expires, sample, 1e12) in (True, False)
    sample.to_local(expires)


def test_a_date_header_at_the_end_of_time_fails_closed() -> None:
    """A Date so far ahead that the arithmetic overflows: not valid, no exception."""
    from approval_guard._codec.clock import ClockSample, still_valid

    sample = ClockSample(
        sent=0.0, received=0.0, date=datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
    )
    assert (False, None) == still_valid(datetime(9999, 12, 31, tzinfo=timezone.utc), sample, 5.0)


_MOMENTS = st.one_of(
    st.none(),
    st.sampled_from(
        [
            datetime.min.replace(tzinfo=timezone.utc),
            datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
        ]
    ),
    st.integers(-5, 5).map(lambda s: T0 + timedelta(seconds=s / 2)),
)


@given(_MOMENTS, _MOMENTS, _MOMENTS, _MOMENTS, st.floats(-5, 5), st.floats(-5, 1e12))
def test_a_samples_certain_bound_is_its_upper_bound_unless_the_date_lags(
    date: datetime | None,
    floor: datetime | None,
    created: datetime | None,
    decided: datetime | None,
    sent: float,
    now: float,
) -> None:
    """certain_upper is the upper bound, or None when the Date lags; knowing keeps the latest."""
    sample = ClockSample(sent=sent, received=sent + 0.1, date=date, floor=floor)
    known = [m for m in (floor, created, decided) if m is not None]
    expected = ClockSample(sent, sent + 0.1, date, max(known)) if known else sample
    assert expected == sample.knowing(created, None, decided)
    sample = expected
    upper = None if sample.lagging else sample.provider_now_upper(now)
    assert upper == sample.certain_upper(now)
