"""The demo's status line on a terminal: a log record never runs into it."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from approval_guard.cli._output import LiveLine, logs_above


class Terminal(io.StringIO):
    """stdout and stderr of one terminal: what is written, in order; a tty."""

    def isatty(self) -> bool:
        return True

    def screen(self) -> list[str]:
        """The rows a person sees: ``\\r`` returns to the row's start and overwrites."""
        rows: list[str] = []
        row: list[str] = []
        column = 0
        for char in self.getvalue():
            if char == "\n":
                rows.append("".join(row).rstrip())
                row, column = [], 0
            elif char == "\r":
                column = 0
            else:
                if column < len(row):
                    row[column] = char
                else:
                    row.append(char)
                column += 1
        if row:
            rows.append("".join(row).rstrip())
        return rows


def test_a_warning_while_the_status_line_shows_gets_a_row_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard's warning from another thread is a row; then the counter comes back, alone."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    live = LiveLine(terminal, monotonic=iter(range(0, 1000, 5)).__next__)
    edit = "issue_refund (r1) runs with a reviewer's edit: amount: 4900 -> 2500"

    with logs_above(live):
        live.update("waiting for a decision on r1: 29m 40s left")
        logging.getLogger("approval_guard").warning(edit)
        live.update("waiting for a decision on r1: 29m 35s left")
    live.clear()
    print("Outcome: approved, and issue_refund ran.", file=terminal)

    assert [
        edit,
        "Outcome: approved, and issue_refund ran.",
    ] == [row for row in terminal.screen() if row]
