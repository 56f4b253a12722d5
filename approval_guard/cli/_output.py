"""What the command writes to the terminal: every line a person reads from it.

Tool names and arguments come from a model, so everything the provider sends
goes through :func:`safe` (``approval_guard._codec.display``) before it is printed;
numbers are printed exactly as stored, and a guard's redaction marker as
``\u2039redacted 1a2b3c4d5e6f\u203a``, as the review page shows it. ``--json``
output is the provider's JSON, markers and all, and never goes through here.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from datetime import datetime
from typing import Any, TextIO

from approval_guard._codec.display import escape, escape_lines, with_markers_shown
from approval_guard._codec.duration import format_time_left
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.now import utcnow
from approval_guard.exceptions import ProviderError

PROG = "approval-guard"


class CliError(ProviderError):
    """A failure worth one line on stderr and exit code 1."""


class UsageError(CliError):
    """A command line that asks for what cannot be done: one line on stderr, exit code 2.

    Raised before anything is sent, so the provider never sees the request.
    """

    exit_code = 2


def usage_failed(error: UsageError) -> int:
    """Report ``error`` as ``main`` reports a :class:`CliError`; its exit code (2)."""
    say(f"{PROG}: error: {error}", stream=sys.stderr)
    return error.exit_code


def say(message: str = "", *, stream: TextIO | None = None) -> None:
    """Print one line, flushed (a person may be watching a pipe)."""
    print(message, file=stream or sys.stdout, flush=True)


def safe(text: str) -> str:
    """Make provider text safe for a terminal: hidden characters escaped, as on the page.

    Tool names and arguments come from a model; an escape sequence in them must
    not be able to rewrite the reviewer's screen, nor a bidi override reverse them.
    """
    return escape(text)


def pretty_json(value: Any, *, indent: str = "", redacted: Collection[str] = ()) -> str:
    """Readable JSON, numbers exact, each line terminal-safe.

    The markers at the JSON Pointers in ``redacted`` (the request's API 1.3
    ``redacted``) are shown as redacted; any other is the JSON it is.
    """
    text = escape_lines(dump_json(with_markers_shown(value, redacted), indent=2))
    return "\n".join(indent + line for line in text.splitlines())


def compact_json(value: Any, *, width: int, redacted: Collection[str] = ()) -> str:
    """One terminal-safe line of JSON cut to ``width`` with "…" (``redacted``: see pretty_json)."""
    text = safe(dump_json(with_markers_shown(value, redacted)))
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def local_time(moment: datetime) -> str:
    """A provider timestamp in the reader's own time zone."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def time_left(deadline: datetime) -> str:
    """``"29m 54s left"`` until ``deadline``; ``"deadline passed"`` once it has."""
    return format_time_left((deadline - utcnow()).total_seconds())


class LiveLine:
    """One status line: rewritten in place on a terminal, printed every few seconds otherwise."""

    def __init__(
        self,
        stream: TextIO,
        *,
        every: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._monotonic = monotonic
        self._tty = stream.isatty()
        self._every = 1.0 if self._tty else every
        self._last = -float("inf")
        self._width = 0
        # Log records come from other threads (see logs_above): one writer at a time.
        self._lock = threading.Lock()

    def update(self, text: str) -> None:
        """Show ``text``, unless the line was shown less than an interval ago."""
        with self._lock:
            now = self._monotonic()
            if now - self._last < self._every:
                return
            self._last = now
            if self._tty:
                self._stream.write("\r" + text.ljust(self._width))
                self._width = len(text)
            else:
                self._stream.write(text + "\n")
            self._stream.flush()

    def clear(self) -> None:
        """Erase the line (on a terminal) so that ordinary output can follow."""
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self._last = self._monotonic()  # and do not redraw it straight away
        if self._tty and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0

    def print_above(self, text: str, stream: TextIO) -> None:
        """Write a whole line of ``text`` to ``stream``, the status line erased first.

        On a terminal both streams share the screen: written after the status
        line, ``text`` would start on its row ("…29m 40s leftissue_refund…").
        """
        with self._lock:
            self._clear()
            stream.write(text + "\n")
            stream.flush()


class _AboveTheLine(logging.Handler):
    """Writes each log record as its own line above a :class:`LiveLine`."""

    def __init__(self, live: LiveLine, stream: TextIO) -> None:
        super().__init__(logging.WARNING)
        self._live = live
        self._stream = stream
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._live.print_above(self.format(record), self._stream)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def logs_above(live: LiveLine, logger: str = "approval_guard") -> Iterator[None]:
    """While a status line shows, ``logger``'s warnings print as lines of their own above it."""
    target = logging.getLogger(logger)
    handler = _AboveTheLine(live, sys.stderr)
    propagate = target.propagate
    target.addHandler(handler)
    target.propagate = False  # not a second time, through whatever else is configured
    try:
        yield
    finally:
        target.removeHandler(handler)
        target.propagate = propagate
