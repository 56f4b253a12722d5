"""The execution record: which approved requests' calls have started, keyed by request id.

An approval record at the provider does not say whether the tool ran. The
ledger does: before an approved call starts, the guard *claims* the request id;
only the one claimer may start the call. A claim is written before the call and
marked ``finished`` or ``failed`` after it, so a crash in between leaves
``started``, which counts as run (at most once, never twice).

Implementations: :class:`MemoryLedger` (one process, here), ``SQLiteLedger``
(one host, several processes; ``_ledger_sqlite.py``), ``PostgresLedger`` (a
fleet; ``_ledger_pg.py``). All keep the :class:`Ledger` protocol.
"""

from __future__ import annotations

import os
import socket
import threading
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import attrs

from ._now import utcnow

STARTED = "started"
FINISHED = "finished"
FAILED = "failed"
STATES = (STARTED, FINISHED, FAILED)


def default_worker() -> str:
    """``host:pid``, the default name of the worker that runs a call."""
    return f"{socket.gethostname()}:{os.getpid()}"


@attrs.frozen
class Execution:
    """One row of the execution record."""

    request_id: str
    tool: str
    state: str
    worker: str
    started_at: datetime
    ended_at: datetime | None = None
    error: str | None = None


@runtime_checkable
class Ledger(Protocol):
    """The execution record's contract.

    ``claim`` is atomic across every process that shares the record: of all
    the callers claiming one request id, exactly one gets True, ever (until a
    claim is released). Any failure to reach the record raises
    :class:`~approval_guard.exceptions.LedgerError`; the guard then does not
    run the tool.
    """

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won."""
        ...

    def finish(self, request_id: str) -> None:
        """Mark a claimed call as ``finished``."""
        ...

    def fail(self, request_id: str, error: str) -> None:
        """Mark a claimed call as ``failed`` (it ran and raised; it still counts as run)."""
        ...

    def release(self, request_id: str) -> None:
        """Give back a claim whose call never started (for example, the approval expired)."""
        ...

    def get(self, request_id: str) -> Execution | None:
        """The row for ``request_id``, or None."""
        ...

    def recent(self, limit: int = 50) -> list[Execution]:
        """The newest rows first."""
        ...

    def prune(self, older_than: timedelta) -> int:
        """Delete rows that ended (or started) more than ``older_than`` ago; return the count."""
        ...


class MemoryLedger:
    """An in-process execution record: at most once within one process.

    It forgets everything when the process exits; use ``SQLiteLedger`` when a
    restarted process may recover an approval that an earlier one used.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, Execution] = {}

    def __repr__(self) -> str:
        return f"MemoryLedger(rows={len(self._rows)})"

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        with self._lock:
            if request_id in self._rows:
                return False
            self._rows[request_id] = Execution(
                request_id=request_id, tool=tool, state=STARTED, worker=worker, started_at=utcnow()
            )
            return True

    def _end(self, request_id: str, state: str, error: str | None) -> None:
        with self._lock:
            row = self._rows.get(request_id)
            if row is not None and row.state == STARTED:
                self._rows[request_id] = attrs.evolve(
                    row, state=state, ended_at=utcnow(), error=error
                )

    def finish(self, request_id: str) -> None:
        self._end(request_id, FINISHED, None)

    def fail(self, request_id: str, error: str) -> None:
        self._end(request_id, FAILED, error)

    def release(self, request_id: str) -> None:
        with self._lock:
            row = self._rows.get(request_id)
            if row is not None and row.state == STARTED:
                del self._rows[request_id]

    def get(self, request_id: str) -> Execution | None:
        with self._lock:
            return self._rows.get(request_id)

    def recent(self, limit: int = 50) -> list[Execution]:
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda r: r.started_at, reverse=True)
        return rows[:limit]

    def prune(self, older_than: timedelta) -> int:
        cutoff = utcnow() - older_than
        with self._lock:
            old = [k for k, r in self._rows.items() if (r.ended_at or r.started_at) < cutoff]
            for key in old:
                del self._rows[key]
        return len(old)


_PROCESS_LEDGER = MemoryLedger()


def process_ledger() -> MemoryLedger:
    """The execution record every Guard uses unless given one: one per process.

    Shared, so that a harness that builds a Guard per session and retries a
    call with the same key still runs the approved call at most once.
    """
    return _PROCESS_LEDGER


class ProviderLedger:
    """One provider's view of an execution record: request ids are scoped by provider.

    Two providers may both hand out id ``1``; in the underlying record a row is
    keyed ``"<provider URL> <request id>"`` (a URL has no spaces), so their
    calls never share a claim. Through this view the ids are the provider's own.
    """

    def __init__(self, record: Ledger, provider: str) -> None:
        if any(ch.isspace() for ch in provider):
            raise ValueError("a provider URL has no whitespace")
        self.record = record
        self.provider = provider
        self._prefix = provider + " "

    def __repr__(self) -> str:
        return repr(self.record)

    def key(self, request_id: str) -> str:
        """The row's key in the underlying record."""
        return self._prefix + request_id

    def _own(self, row: Execution | None) -> Execution | None:
        if row is None or not row.request_id.startswith(self._prefix):
            return None
        return attrs.evolve(row, request_id=row.request_id[len(self._prefix) :])

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        return self.record.claim(self.key(request_id), tool=tool, worker=worker)

    def finish(self, request_id: str) -> None:
        self.record.finish(self.key(request_id))

    def fail(self, request_id: str, error: str) -> None:
        self.record.fail(self.key(request_id), error)

    def release(self, request_id: str) -> None:
        self.record.release(self.key(request_id))

    def get(self, request_id: str) -> Execution | None:
        return self._own(self.record.get(self.key(request_id)))

    def recent(self, limit: int = 50) -> list[Execution]:
        """This provider's rows among the record's newest ``limit``, newest first."""
        rows = (self._own(row) for row in self.record.recent(limit))
        return [row for row in rows if row is not None]

    def prune(self, older_than: timedelta) -> int:
        """Prunes the whole record (every provider's rows), as its own ``prune`` does."""
        return self.record.prune(older_than)
