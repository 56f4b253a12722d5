"""The execution record: which approved requests' calls have started, keyed by request id.

An approval record at the provider does not say whether the tool ran. The
ledger does: before an approved call starts, the guard *claims* the request id;
only the one claimer may start the call. A claim is written before the call and
marked ``finished`` or ``failed`` after it, so a crash in between leaves
``started``, which counts as run (at most once, never twice).

Implementations: :class:`MemoryLedger` (one process, here), ``SQLiteLedger``
(one host, several processes; ``_ledger/sqlite.py``), ``PostgresLedger`` (a
fleet; ``_ledger/postgres.py``). All keep the :class:`Ledger` protocol.

A row also keeps the SHA-256 of the arguments that ran (``arguments_digest``),
since a reviewer may have edited them; the guard computes it, a ledger only
stores it. A Guard refuses a ledger whose ``claim`` cannot take it.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import socket
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import attrs

STARTED = "started"
FINISHED = "finished"
FAILED = "failed"
STATES = (STARTED, FINISHED, FAILED)

log = logging.getLogger("approval_guard")

_DIGEST = re.compile(r"[0-9a-f]{64}")


def default_worker() -> str:
    """``host:pid``, the default name of the worker that runs a call."""
    return f"{socket.gethostname()}:{os.getpid()}"


@attrs.frozen
class Execution:
    """One row of the execution record.

    Attributes:
        request_id: The approval request's id (one row per approved request).
        tool: The tool's name.
        state: ``"started"``, ``"finished"`` or ``"failed"``.
        worker: Who claimed it (host and process).
        started_at: When it was claimed (UTC).
        ended_at: When it finished or failed (UTC); None while started.
        error: What the tool raised, for a failed row; else None.
        arguments_digest: Lowercase hex SHA-256 of the canonical JSON of the arguments that ran;
            None if the row predates digests or its claimer gave none.
    """

    request_id: str
    tool: str
    state: str
    worker: str
    started_at: datetime
    ended_at: datetime | None = None
    error: str | None = None
    #: Lowercase hex SHA-256 of the canonical JSON of the arguments that ran; None if
    #: the row predates digests or its claimer gave none.
    arguments_digest: str | None = None


def check_digest(arguments_digest: object) -> str | None:
    """``arguments_digest`` if it is None or 64 lowercase hex characters; else ValueError.

    Every ledger checks before it touches its storage, so a malformed digest
    never reaches a row.
    """
    if arguments_digest is None:
        return None
    if isinstance(arguments_digest, str) and _DIGEST.fullmatch(arguments_digest):
        return arguments_digest
    # Say what was wrong with it, not what it was: it could be the arguments themselves.
    if not isinstance(arguments_digest, str):
        shape = f"a {type(arguments_digest).__name__}"
    elif len(arguments_digest) != 64:
        shape = f"a string of {len(arguments_digest)} characters"
    else:
        shape = "a string with characters other than 0-9 and a-f"
    raise ValueError(
        f"arguments_digest must be a SHA-256 as 64 lowercase hex characters or None, not {shape}"
    )


def claim_accepts_digest(ledger: object) -> bool:
    """Whether ``ledger.claim`` can be called as the guard calls it, digest included.

    That is ``claim(request_id, tool=..., worker=..., arguments_digest=...)``, a
    plain (not ``async``) function whose signature takes those arguments (or
    ``**kwargs``) and needs no other. A coroutine claim would always be truthy,
    letting every approved call run. False too when the signature cannot be
    read: a Guard refuses such a ledger when it is made, rather than fail (or
    run twice) on an approved call.
    """
    claim = getattr(ledger, "claim", None)
    if claim is None or not callable(claim):
        return False
    if inspect.iscoroutinefunction(claim) or inspect.isasyncgenfunction(claim):
        return False
    try:
        signature = inspect.signature(claim)
    except (TypeError, ValueError):
        return False
    try:
        signature.bind("request-id", tool="tool", worker="worker", arguments_digest=None)
    except TypeError:
        return False
    return True


class _Rows(Protocol):
    """What every execution record does besides ``claim``."""

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


@runtime_checkable
class Ledger(_Rows, Protocol):
    """The execution record's contract.

    ``claim`` is atomic across every process that shares the record: of all
    the callers claiming one request id, exactly one gets True, ever (until a
    claim is released). Any failure to reach the record raises
    :class:`~approval_guard.exceptions.LedgerError`; the guard then does not
    run the tool.
    """

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won.

        ``arguments_digest`` (None, or 64 lowercase hex characters, else
        ValueError before anything is written) is stored with the row.

        Args:
            request_id: The approval request's id (one row per approved request).
            tool: The tool's name, kept with the row.
            worker: Who runs the call (host and process), kept with the row.
            arguments_digest: Lowercase hex SHA-256 of the canonical JSON of the arguments that run,
                or None; anything else is ValueError before anything is written.
        """
        ...
