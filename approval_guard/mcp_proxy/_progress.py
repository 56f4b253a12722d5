"""Progress notifications while a relayed call waits for a person: "waiting for approval (9m left)".

The guarded call's events say when its request exists and how long it may
still wait (:class:`Waiting` is its ``on_event``); :func:`report_while_waiting`
sends the client a ``notifications/progress`` then, and every
:data:`PROGRESS_EVERY` seconds until a decision arrives. Progress counts the
seconds waited (it only grows, as MCP asks); a client that gave no
``progressToken`` gets nothing. Many clients restart their request timeout on
each progress notification, so a long wait does not look like a hung server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from approval_guard._call.events import (
    CallNotRun,
    Decided,
    RequestCreated,
    StillWaiting,
    ToolStarted,
)
from approval_guard._codec.duration import format_duration
from approval_guard._codec.now import utcnow

log = logging.getLogger("approval_guard")

#: Seconds between two progress notifications while a call waits.
PROGRESS_EVERY = 5.0

#: ``(progress, total, message)``: the request's own progress reporter.
Report = Callable[[float, "float | None", "str | None"], Awaitable[None]]


class Waiting:
    """One call's waiting state, fed by its events (the spec's ``on_event``)."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.created = asyncio.Event()
        self.over = asyncio.Event()
        self.deadline_at: datetime | None = None
        self.started = time.monotonic()

    def __call__(self, event: Any) -> None:
        if isinstance(event, (RequestCreated, StillWaiting)):
            self.deadline_at = event.deadline_at
            self.created.set()
        elif isinstance(event, (Decided, ToolStarted, CallNotRun)):
            self.over.set()

    def message(self) -> str:
        if self.deadline_at is None:
            return f"waiting for approval of {self.tool}"
        left = (self.deadline_at - utcnow()).total_seconds()
        return f"waiting for approval of {self.tool} ({format_duration(max(0.0, left))} left)"


async def report_while_waiting(
    waiting: Waiting, report: Report, every: float = PROGRESS_EVERY
) -> None:
    """Send progress once the request exists, then every ``every`` seconds, until it is decided.

    A failed notification (the client went away) ends the reports, never the call.
    """
    await waiting.created.wait()
    while not waiting.over.is_set():
        try:
            await report(time.monotonic() - waiting.started, None, waiting.message())
        except Exception:
            log.debug("a progress notification for %s failed", waiting.tool, exc_info=True)
            return
        try:
            await asyncio.wait_for(waiting.over.wait(), every)
        except asyncio.TimeoutError:
            continue
