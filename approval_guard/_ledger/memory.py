"""The execution record: which approved requests' calls have started, keyed by request id.

An approval record at the provider does not say whether the tool ran. The
ledger does: before an approved call starts, the guard *claims* the request id;
only the one claimer may start the call. A claim is written before the call and
marked ``finished`` or ``failed`` after it, so a crash in between leaves
``started``, which counts as run (at most once, never twice).

Implementations: :class:`MemoryLedger` (one process, here), ``SQLiteLedger``
(one host, several processes; ``_ledger_sqlite.py``), ``PostgresLedger`` (a
fleet; ``_ledger_pg.py``). All keep the :class:`Ledger` protocol.

A row also keeps the SHA-256 of the arguments that ran (``arguments_digest``),
since a reviewer may have edited them; the guard computes it, a ledger only
stores it. A user's own ledger written before that field existed still works:
:class:`ProviderLedger` passes the digest only to a ``claim`` that takes it.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
import os
import re
import socket
import threading
import urllib.parse
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Protocol, cast, runtime_checkable

import attrs

from approval_guard._codec.now import utcnow

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
    """One row of the execution record."""

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
    """Whether ``ledger.claim`` takes an ``arguments_digest`` keyword (or ``**kwargs``).

    A ledger written against the protocol before digests existed does not;
    False too when the signature cannot be read, so that such a ledger is
    called the way it was written for.
    """
    claim = getattr(ledger, "claim", None)
    if claim is None:
        return False
    try:
        parameters = inspect.signature(claim).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (
            p.name == "arguments_digest"
            and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        )
        for p in parameters
    )


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
        """
        ...


@runtime_checkable
class LegacyLedger(_Rows, Protocol):
    """The :class:`Ledger` contract as it was before ``arguments_digest``.

    A record written against it still works behind :class:`ProviderLedger`
    (so in a Guard); its rows just do not say which arguments ran.
    """

    def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
        """Record ``started`` for ``request_id`` if nobody has; True if this caller won."""
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

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        digest = check_digest(arguments_digest)
        with self._lock:
            if request_id in self._rows:
                return False
            self._rows[request_id] = Execution(
                request_id=request_id,
                tool=tool,
                state=STARTED,
                worker=worker,
                started_at=utcnow(),
                arguments_digest=digest,
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

    A record whose ``claim`` predates ``arguments_digest`` is still called the
    old way; the digest is then dropped, with one warning.
    """

    def __init__(self, record: Ledger | LegacyLedger, provider: str) -> None:
        if any(ch.isspace() for ch in provider):
            raise ValueError("a provider URL has no whitespace")
        self.record = record
        self.provider = provider
        self._prefix = provider + " "
        self._stores_digest = claim_accepts_digest(record)
        self._warn_lock = threading.Lock()
        self._warned = False

    def __repr__(self) -> str:
        return repr(self.record)

    def key(self, request_id: str) -> str:
        """The row's key in the underlying record."""
        return self._prefix + request_id

    def _own(self, row: Execution | None) -> Execution | None:
        if row is None or not row.request_id.startswith(self._prefix):
            return None
        return attrs.evolve(row, request_id=row.request_id[len(self._prefix) :])

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        digest = check_digest(arguments_digest)
        if self._stores_digest:
            # claim_accepts_digest read the signature: this is a Ledger, not a LegacyLedger.
            return cast(Ledger, self.record).claim(
                self.key(request_id), tool=tool, worker=worker, arguments_digest=digest
            )
        if digest is not None:
            self._warn_dropped()
        return self.record.claim(self.key(request_id), tool=tool, worker=worker)

    def _warn_dropped(self) -> None:
        with self._warn_lock:
            if self._warned:
                return
            self._warned = True
        # The type, not the repr: a user's repr may show a connection string.
        log.warning(
            "the execution record %s cannot store argument digests (its claim() takes no "
            "arguments_digest), so its rows will not say which arguments ran",
            type(self.record).__name__,
        )

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


def provider_scope(base_url: str) -> str:
    """The provider's identity in the execution record: scheme, host and port, then the path."""
    parts = urllib.parse.urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    # One host, one spelling: no trailing dot (an absolute DNS name), an address in its
    # canonical form (``[0:0:0:0:0:0:0:1]`` is ``[::1]``), so one provider is one scope.
    host = (parts.hostname or "").lower().rstrip(".")
    with suppress(ValueError):
        host = ipaddress.ip_address(host).compressed
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}:{port}{parts.path.rstrip('/')}"
