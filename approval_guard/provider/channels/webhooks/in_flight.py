"""A stopping server lets the outbox deliveries in flight finish and be recorded.

A delivery cut between its send and its record would be sent again by the
next run: a second Slack message, a second email, a webhook twice. So a stop
gives each delivery in flight :data:`FINISH_SECONDS` to end on its own (its
send answered and settled), and only then cancels what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection

#: How long a stop waits for the deliveries in flight before it cancels them.
FINISH_SECONDS = 3.0


async def finish_in_flight(
    tasks: Collection[asyncio.Task[None]], *, seconds: float = FINISH_SECONDS
) -> None:
    """Let ``tasks`` end for up to ``seconds``, then cancel the rest and wait for them."""
    running = [task for task in tasks if not task.done()]
    if not running:
        return
    ended, late = await asyncio.wait(running, timeout=seconds)
    for task in ended:
        if not task.cancelled():
            task.exception()  # logged where it was raised; retrieved here
    for task in late:
        task.cancel()
    for task in late:
        with contextlib.suppress(BaseException):
            await task
