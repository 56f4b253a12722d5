"""Driving group commit from tests, on either store: a gate that holds a batch open, threads.

A *gate* is a write that holds the writer lock (and opens a batch) until the
test has queued the writers it wants in that batch; ``start_all`` runs calls in
threads of their own and collects what each returned or raised.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from tests.support.api import wait_for


class Boom(Exception):
    """A body's own error."""


def wait_for_waiters(store: Any, waiting: int) -> None:
    """Return once ``waiting`` threads block on the store's writer lock."""
    wait_for(
        lambda: store._group.waiting >= waiting,
        timeout=20,
        what=f"fewer than {waiting} waiting",
    )


class Gate:
    """A write holding the writer lock, opener of the batch, until enough writers queue."""

    def __init__(self, store: Any, body: Callable[[Any], None] | None = None) -> None:
        self.store = store
        self.key = "gate-" + uuid.uuid4().hex
        self.entered = threading.Event()
        self.go = threading.Event()
        self.out: list[Any] = []

        def run() -> None:
            try:
                with store._writing() as tx:
                    tx.execute("INSERT INTO meta (key, value) VALUES (?, 'x')", (self.key,))
                    self.entered.set()
                    assert self.go.wait(20)
                    if body is not None:
                        body(tx)
                self.out.append("ok")
            except BaseException as exc:
                self.out.append(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.entered.wait(10)

    def wait_for(self, waiting: int) -> None:
        """Return once ``waiting`` threads block on the writer lock."""
        wait_for_waiters(self.store, waiting)

    def open_when(self, waiting: int) -> None:
        """Let the gate go once ``waiting`` threads block on the writer lock; join it."""
        self.wait_for(waiting)
        self.go.set()
        self.thread.join(20)
        assert not self.thread.is_alive()


def start_all(calls: list[Callable[[], Any]]) -> Callable[[], list[Any]]:
    """Start each call in its own thread; the returned function joins them all."""
    out: list[Any] = [None] * len(calls)
    threads = []
    for i, call in enumerate(calls):

        def run(i: int = i, call: Callable[[], Any] = call) -> None:
            try:
                out[i] = call()
            except BaseException as exc:
                out[i] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)

    def join() -> list[Any]:
        for thread in threads:
            thread.join(30)
        assert [] == [t for t in threads if t.is_alive()], "a writer was never answered"
        return out

    return join
