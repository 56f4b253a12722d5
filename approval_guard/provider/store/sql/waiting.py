"""Many requests read at once, for one batched wait (API 1.2): their states, then whole requests.

A batched wait (``POST /v1/requests/wait``) first reads only what tells
whether a request changed (status, deadline, the approvals counted so far) for
every id it lists, and reads whole requests only for those it answers with.
As for one request, a pending request whose deadline has passed is expired
first, and an instance credential's wait counts as one poll of each of its
requests in the audit trail (one write for the whole batch).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import attrs

from approval_guard._codec.exact_json import load_stored
from approval_guard._codec.wire import PENDING
from approval_guard.provider.store.models import StoredRequest
from approval_guard.provider.store.sql.base import from_us, request_from_row, to_us
from approval_guard.provider.store.sql.requests import RequestsMixin

#: Ids per statement (SQLite's oldest builds allow 999 markers).
_CHUNK = 500
_STATE_COLUMNS = "id, owner_id, status, deadline_at, approval_list"


@attrs.frozen
class WaitState:
    """What tells whether a request changed while a batched wait held it."""

    status: str
    deadline_at: datetime
    #: How many approvals are counted so far.
    approvals: int


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _marks(n: int) -> str:
    return ", ".join("?" * n)


class WaitingMixin(RequestsMixin):
    """Read many requests at once: their states for a batched wait, then whole ones."""

    def _rows(self, columns: str, ids: Sequence[str], owner_id: str | None) -> dict[str, Any]:
        found: dict[str, Any] = {}
        with self._reading() as db:
            for chunk in _chunks(ids):
                rows = db.execute(
                    f"SELECT {columns} FROM requests WHERE id IN ({_marks(len(chunk))})", chunk
                ).fetchall()
                for row in rows:
                    if owner_id is None or row["owner_id"] == owner_id:
                        found[row["id"]] = row
        return found

    def wait_states(
        self, request_ids: Sequence[str], *, owner_id: str | None, count_poll: bool = False
    ) -> dict[str, WaitState]:
        """The state of each of ``request_ids`` that exists (and is ``owner_id``'s, if given).

        Overdue pending requests are expired first; ``count_poll`` counts one
        poll of each found request (an instance credential's wait).
        """
        ids = list(request_ids)
        rows = self._rows(_STATE_COLUMNS, ids, owner_id)
        now_us = to_us(self.now())
        overdue = [
            rid
            for rid, row in rows.items()
            if row["status"] == PENDING and row["deadline_at"] <= now_us
        ]
        if overdue:
            self._expire(overdue)
            rows.update(self._rows(_STATE_COLUMNS, overdue, owner_id))
        if count_poll and rows:
            self.count_polls(list(rows))
        states: dict[str, WaitState] = {}
        for rid, row in rows.items():
            deadline = from_us(row["deadline_at"])
            assert deadline is not None
            counted = row["approval_list"]
            states[rid] = WaitState(
                row["status"], deadline, len(load_stored(counted)) if counted else 0
            )
        return states

    def count_polls(self, request_ids: Sequence[str]) -> None:
        """Count one poll of each of ``request_ids`` (existing requests), in one write."""
        if not request_ids:
            return
        now_us = to_us(self.now())
        with self._writing() as tx:
            for chunk in _chunks(list(request_ids)):
                tx.execute(
                    "UPDATE requests SET poll_count = poll_count + 1, last_polled_at = ? "
                    f"WHERE id IN ({_marks(len(chunk))})",
                    (now_us, *chunk),
                )

    def get_requests(
        self, request_ids: Sequence[str], *, owner_id: str | None = None
    ) -> dict[str, StoredRequest]:
        """The current state of each of ``request_ids`` found (and ``owner_id``'s, if given)."""
        ids = list(request_ids)
        rows = self._rows("*", ids, owner_id)
        now_us = to_us(self.now())
        overdue = [
            rid
            for rid, row in rows.items()
            if row["status"] == PENDING and row["deadline_at"] <= now_us
        ]
        if overdue:
            self._expire(overdue)
            rows.update(self._rows("*", overdue, owner_id))
        return {rid: request_from_row(row) for rid, row in rows.items()}
