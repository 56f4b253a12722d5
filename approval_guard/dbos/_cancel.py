"""Cancelled workflows noticed while their guarded steps wait: one watcher thread per process.

``DBOS.cancel_workflow`` (or ``DBOSClient.cancel_workflow`` from another process)
only marks the workflow CANCELLED in the system database; a step already running
is not told. A guarded step waiting for a person registers its workflow here, and
one daemon thread reads the statuses of every registered workflow at once, each
:data:`INTERVAL` seconds, and sets the waiting call's abandon event when its
workflow is cancelled, so the guard withdraws the pending request and returns
``NotRun(CANCELLED)``. The harness's own abandon event is read by the call
itself, through the same event, never through the thread: a read of DBOS's
database may wait as long as the database is away (DBOS retries it until it
answers), and the harness's word must not wait for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import attrs
from dbos import DBOS

log = logging.getLogger("approval_guard")

#: Seconds between two reads of the registered workflows' statuses.
INTERVAL = 0.5


class _Abandon(threading.Event):
    """Set by the watcher when the workflow is cancelled; reads as set once ``also`` is, too."""

    def __init__(self, also: threading.Event | None) -> None:
        super().__init__()
        self._also = also

    def is_set(self) -> bool:
        return super().is_set() or (self._also is not None and self._also.is_set())

    def wait(self, timeout: float | None = None) -> bool:
        if self._also is None:
            return super().wait(timeout)
        end = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():  # two events: look at the harness's every 50 ms
            left = 0.05 if end is None else min(0.05, end - time.monotonic())
            if left <= 0:
                return False
            super().wait(left)
        return True


@attrs.define(eq=False)
class _Waiter:
    workflow_id: str
    abandon: _Abandon


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[_Waiter] = set()
        self._thread: threading.Thread | None = None

    def add(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.add(waiter)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="approval_guard-dbos-cancel", daemon=True
                )
                self._thread.start()

    def remove(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.discard(waiter)

    def _run(self) -> None:
        wake = threading.Event()  # never set: a timed wait that needs no sleep
        while True:
            with self._lock:
                waiters = list(self._waiters)
                if not waiters:
                    self._thread = None
                    return
            ids = sorted({w.workflow_id for w in waiters if not w.abandon.is_set()})
            if ids:
                try:
                    cancelled = {
                        status.workflow_id
                        for status in DBOS.list_workflows(
                            workflow_ids=ids,
                            status="CANCELLED",
                            load_input=False,
                            load_output=False,
                        )
                    }
                except Exception as exc:  # the database is away: keep waiting, read again
                    log.warning("could not read DBOS workflow statuses: %s", type(exc).__name__)
                    cancelled = set()
                for waiter in waiters:
                    if waiter.workflow_id in cancelled:
                        waiter.abandon.set()
            wake.wait(INTERVAL)


_WATCHER = _Watcher()


@contextmanager
def watching(workflow_id: str, also: threading.Event | None) -> Iterator[threading.Event]:
    """An event set once ``workflow_id`` is cancelled (or ``also`` is set), watched in the block."""
    waiter = _Waiter(workflow_id, _Abandon(also))
    _WATCHER.add(waiter)
    try:
        yield waiter.abandon
    finally:
        _WATCHER.remove(waiter)
