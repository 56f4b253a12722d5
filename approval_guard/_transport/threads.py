"""Running one blocking function in a helper thread that the caller can stop waiting for.

A blocking socket read cannot be interrupted from another thread
(psf/requests#5633), and a provider that drips its answer a byte at a time
never trips a per-read timeout. So where a wait must end on time, the I/O runs
in a daemon helper thread and the caller waits on an event, with a deadline
of its own; a helper left behind finishes (or fails) on its own later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Outcome:
    """What the helper thread produced: ``value`` or ``error``, and ``done`` once set."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def result(self) -> Any:
        """The value, or raise the helper's exception."""
        if self.error is not None:
            raise self.error
        return self.value


def start(
    fn: Callable[[], Any], *, name: str, on_done: Callable[[], None] | None = None
) -> Outcome:
    """Run ``fn`` in a new daemon thread; ``on_done`` is called from it when it ends."""
    outcome = Outcome()

    def run() -> None:
        try:
            outcome.value = fn()
        except BaseException as exc:  # handed to the waiting caller
            outcome.error = exc
        finally:
            outcome.done.set()
            if on_done is not None:
                on_done()

    threading.Thread(target=run, name=name, daemon=True).start()
    return outcome
