"""The wall-clock "now" in UTC: the one place the package asks the system for it.

Deadlines are monotonic (``_codec/clock.py``); this is for timestamps a person or
another process reads: a ledger row's times, the local provider's records.
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["utcnow"]


def utcnow() -> datetime:
    """The system's wall time now, as an aware UTC ``datetime``."""
    return datetime.now(timezone.utc)
