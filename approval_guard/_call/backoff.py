"""When to try an exchange again, and how long to pause first: the retry policy."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterator
from datetime import datetime

import attrs
import backoff

from approval_guard._codec.wire import parse_http_date
from approval_guard._transport.answer import Answer

__all__ = ["MAX_RETRY_AFTER", "RETRYABLE_STATUS", "RetryPolicy", "parse_retry_after"]

_JITTER = random.Random()
if hasattr(os, "register_at_fork"):
    # As the random module does for its own: forked workers must not jitter in step.
    os.register_at_fork(after_in_child=_JITTER.seed)

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
#: A longer ``Retry-After`` is read as this (a day): nothing waits that long anyway.
MAX_RETRY_AFTER = 86400.0


def parse_retry_after(value: str | None, date: datetime | None, now: datetime) -> float | None:
    """``Retry-After`` as seconds, at most a day; None if absent or not RFC 9110's form.

    Only delay-seconds (ASCII digits: ``"²".isdigit()`` is true too) or an
    HTTP-date. Never raises.
    """
    if not isinstance(value, str) or not value:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():
        digits = value.lstrip("0") or "0"
        # Twelve digits are enough to tell that it is over a day; no huge number is read.
        return MAX_RETRY_AFTER if len(digits) > 12 else min(MAX_RETRY_AFTER, float(digits))
    moment = parse_http_date(value)
    if moment is None:
        return None
    # Measure against the provider's own Date when we have it: our clocks may disagree.
    reference = date or now
    return min(MAX_RETRY_AFTER, max(0.0, (moment - reference).total_seconds()))


@attrs.define
class RetryPolicy:
    """Capped exponential backoff with full jitter, honouring ``Retry-After``.

    Every pause lasts at least ``floor`` seconds: full jitter can draw 0, and a
    provider may answer ``Retry-After: 0`` forever; neither may make a storm.
    """

    base: float = 0.1
    cap: float = 5.0
    floor: float = 0.1

    def delays(self) -> Iterator[float]:
        """Successive jittered delays for one run of retries, none under ``floor``."""
        gen = backoff.expo(factor=self.base, max_value=self.cap)
        next(gen)  # backoff's generators are primed with one send(None)
        for value in gen:
            # Full jitter (backoff.full_jitter) from the package's own generator: guard
            # threads never move the random module's shared state under their caller.
            yield max(self.floor, _JITTER.uniform(0, value))

    def pause(self, delay: float, retry_after: float | None) -> float:
        """The pause before the next attempt: ``Retry-After`` when given, never under ``floor``."""
        chosen = delay if retry_after is None else retry_after
        if math.isnan(chosen):
            chosen = self.cap
        return max(self.floor, chosen)

    @staticmethod
    def retryable(answer: Answer, *, creating: bool) -> bool:
        if answer.status in RETRYABLE_STATUS:
            return True
        # The first create with this key is still being processed: ask again shortly.
        return creating and answer.status == 409 and answer.error[0] == "idempotency_key_in_use"
