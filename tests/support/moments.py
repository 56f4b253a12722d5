"""Hypothesis strategies for moments, near-miss HTTP dates and RFC 3339 timestamps."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import strategies as st

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


def in_range(moment: datetime) -> bool:
    return moment.tzinfo is timezone.utc and 1970 <= moment.year <= 9998
