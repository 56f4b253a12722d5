"""The one retrying loop: attempt, back off, and give up when the pause would not fit.

Every retry in a call (create, poll, cancel, recover) runs through
:func:`retrying`. An attempt is a generator that returns its result, or
:class:`Again` to be tried again; :func:`retrying` owns the pause between
attempts: the policy's jittered backoff, never under its floor, ``Retry-After``
when the provider gave one, and giving up (:class:`GaveUp`) rather than
sleeping past the deadline. Its pauses are yielded as :class:`~._ops.Sleep`
operations, so the harness may abandon the call during them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

import attrs

from approval_guard._call.backoff import RetryPolicy
from approval_guard._call.ops import Op, Sleep
from approval_guard._codec.clock import Clock

T = TypeVar("T")


@attrs.frozen
class Again:
    """An attempt's answer: try again, after ``retry_after`` seconds if the provider said so.

    ``fresh``: the attempt got a good answer but is not finished (a poll still
    pending): the backoff starts over and the next attempt follows at once.
    ``context``: what the caller needs to describe the failure if it gives up.
    """

    retry_after: float | None = None
    context: object = None
    fresh: bool = False


@attrs.frozen
class GaveUp:
    """The next pause would pass the deadline: ``last`` is the attempt's final ``Again``.

    ``asked``: (seconds asked, seconds left) when the provider's own
    ``Retry-After`` is what did not fit.
    """

    last: Again
    asked: tuple[float, float] | None = None


def retrying(
    attempt: Callable[[], Generator[Op, Any, Again | T]],
    *,
    policy: RetryPolicy,
    clock: Clock,
    until: float,
    abandonable: bool = True,
) -> Generator[Op, Any, T | GaveUp]:
    """Run ``attempt`` until it returns a result, pausing between tries; never past ``until``."""
    # Made at the first pause: most runs end at their first attempt.
    delays: Iterator[float] | None = None
    while True:
        result = yield from attempt()
        if not isinstance(result, Again):
            return result
        if result.fresh:
            delays = None
            continue
        if delays is None:
            delays = policy.delays()
        retry_after = result.retry_after
        seconds = policy.pause(next(delays), retry_after)
        left = until - clock.monotonic()
        if seconds >= left:
            asked = None
            if retry_after is not None and retry_after >= left:
                asked = (retry_after, max(0.0, left))
            return GaveUp(result, asked)
        yield Sleep(seconds, abandonable=abandonable)
