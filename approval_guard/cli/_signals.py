"""SIGTERM handled like Ctrl-C, so ``kill`` stops a long-running verb as cleanly."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def on_sigterm(action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` on SIGTERM, so ``kill`` stops as cleanly as Ctrl-C (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        action()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt() -> None:
    """The action that makes SIGTERM a Ctrl-C: raise ``KeyboardInterrupt`` where the code is."""
    raise KeyboardInterrupt
