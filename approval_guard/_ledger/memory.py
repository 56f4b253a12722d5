"""The execution record in memory: one process's, shared by every Guard without a ledger."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta
from typing import Any

from approval_guard._codec.now import utcnow
from approval_guard._ledger.protocol import FAILED, FINISHED, STARTED, Execution, check_digest


class MemoryLedger:
    """An in-process execution record: at most once within one process.

    It forgets everything when the process exits; use ``SQLiteLedger`` when a
    restarted process may recover an approval that an earlier one used.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Each row as a tuple (request_id, tool, state, worker, started_at, ended_at, error,
        # arguments_digest), Execution's fields in order, made an Execution when read:
        # claim and finish run on every guarded call, reads are rare. (A tuple of strings
        # and datetimes is dropped from the garbage collector's rounds, unlike an object.)
        self._rows: dict[str, tuple[Any, ...]] = {}

    def __repr__(self) -> str:
        return f"MemoryLedger(rows={len(self._rows)})"

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won.

        Args:
            request_id: The approval request's id (one row per approved request).
            tool: The tool's name, kept with the row.
            worker: Who runs the call (host and process), kept with the row.
            arguments_digest: Lowercase hex SHA-256 of the canonical JSON of the arguments that run,
                or None; anything else is ValueError before anything is written.
        """
        digest = check_digest(arguments_digest)
        with self._lock:
            if request_id in self._rows:
                return False
            self._rows[request_id] = (
                request_id,
                tool,
                STARTED,
                worker,
                utcnow(),
                None,
                None,
                digest,
            )
            return True

    def _end(self, request_id: str, state: str, error: str | None) -> None:
        with self._lock:
            row = self._rows.get(request_id)
            if row is not None and row[_STATE] == STARTED:
                rid, tool, _, worker, started_at, _, _, digest = row
                self._rows[request_id] = (
                    rid,
                    tool,
                    state,
                    worker,
                    started_at,
                    utcnow(),
                    error,
                    digest,
                )

    def finish(self, request_id: str) -> None:
        """Mark a claimed call as ``finished``.

        Args:
            request_id: The claimed request's id.
        """
        self._end(request_id, FINISHED, None)

    def fail(self, request_id: str, error: str) -> None:
        """Mark a claimed call as ``failed`` (it ran and raised; it still never runs again).

        Args:
            request_id: The claimed request's id.
            error: What the tool raised (kept, cut to 1,000 characters).
        """
        self._end(request_id, FAILED, error)

    def release(self, request_id: str) -> None:
        """Give back a claim whose call never started; a finished or failed row stays.

        Args:
            request_id: The claimed request's id.
        """
        with self._lock:
            row = self._rows.get(request_id)
            if row is not None and row[_STATE] == STARTED:
                del self._rows[request_id]

    def get(self, request_id: str) -> Execution | None:
        """The row for ``request_id``, or None.

        Args:
            request_id: The request's id.
        """
        with self._lock:
            row = self._rows.get(request_id)
            return None if row is None else Execution(*row)

    def recent(self, limit: int = 50) -> list[Execution]:
        """The newest rows first.

        Args:
            limit: How many rows at most.
        """
        with self._lock:
            # Claims insert at the end and ends rewrite in place, so the dict's order is
            # the order of starts, ties in the clock included.
            newest = itertools.islice(reversed(self._rows.values()), max(limit, 0))
            return [Execution(*row) for row in newest]

    def prune(self, older_than: timedelta) -> int:
        """Delete rows that ended (or started) more than ``older_than`` ago; how many.

        Args:
            older_than: How long ago a row must have ended (or started) to go.
        """
        cutoff = utcnow() - older_than
        with self._lock:
            old = [
                key
                for key, row in self._rows.items()
                if (row[_ENDED_AT] or row[_STARTED_AT]) < cutoff
            ]
            for key in old:
                del self._rows[key]
        return len(old)


# Where Execution's fields are in a row.
_STATE, _STARTED_AT, _ENDED_AT = 2, 4, 5


_PROCESS_LEDGER = MemoryLedger()


def process_ledger() -> MemoryLedger:
    """The execution record every Guard uses unless given one: one per process.

    Shared, so that a harness that builds a Guard per session and retries a
    call with the same key still runs the approved call at most once.
    """
    return _PROCESS_LEDGER
