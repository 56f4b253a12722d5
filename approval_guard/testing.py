"""Helpers for testing code that uses approval_guard: a real provider, in-process.

:class:`LocalProvider` runs the local provider on 127.0.0.1 on a free port and
lets a test play the reviewer::

    import approval_guard.testing as ag_testing

    with ag_testing.LocalProvider() as provider:
        guard = Guard(base_url=provider.url, credential=provider.credential)
        ...                                  # something creates a request
        request = provider.next_request()    # blocks until it appears
        provider.approve(request.id, note="fine")

or decides by policy, in a background thread::

    with ag_testing.LocalProvider(policy=ag_testing.approve_after(0.1)) as provider:
        ...

Fault injection (``provider.faults``) and exchange counters (``provider.stats``)
are those of :class:`approval_guard.provider.Faults` and
:class:`approval_guard.provider.Stats`.

With a file ``db``, a second ``LocalProvider`` on the same file sees everything
the first stored, credentials included: to make that possible, and only for
databases a ``LocalProvider`` created credentials in, their plaintext tokens
are kept in the table ``testing_credentials``. The real ``approval-guard
serve`` never writes that table. ``stop()`` then ``start()`` simulates a
provider restart (on a file: a fresh connection to the same database, the
same port).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from approval_guard._duration import to_timedelta
from approval_guard._now import utcnow
from approval_guard._ops import Timings
from approval_guard._policies import Policy, Validity, approve_after, deny_after
from approval_guard._wire import APPROVED, DENIED, PENDING, ApprovalRequest
from approval_guard.provider._server import DEFAULT_POLL_CAP, ProviderServer
from approval_guard.provider._store import (
    INSTANCE,
    REVIEWER,
    Credential,
    History,
    NotPendingError,
    Store,
    StoreClosedError,
)

logger = logging.getLogger("approval_guard.provider")

# TEMPORARY (integration): server-side faults are gone; the fault proxy replaces these.
FAULT_KINDS = ("drop_after_commit", "reset_before", "status", "garbage", "delay", "headers")
#: What a fault can be aimed at; ``"any"`` matches every ``/v1`` exchange.
EXCHANGES = ("create", "poll", "cancel", "decision", "list", "history", "events", "any")
_STATUS_ERROR_TYPES = {
    429: "rate_limited",
    500: "internal_error",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


@attrs.frozen
class Fault:
    """One queued fault (see :meth:`Faults.add`)."""

    kind: str
    on: str
    status: int
    retry_after: float | str | None
    delay: float
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class FaultRecord:
    """A fault that was injected: what it was and which exchange it hit."""

    kind: str
    exchange: str
    path: str
    status: int | None
    at: float  # time.monotonic() when injected


class Faults:
    """Deterministic fault injection, for tests of code that talks to the provider.

    Faults are matched in the order they were added (first match wins) and each
    is used ``times`` times, then dropped::

        provider.faults.add("drop_after_commit", on="create")
        provider.faults.add("status", on="poll", status=429, retry_after=1, times=2)
        provider.faults.add("delay", on="poll", delay=3.0)

    Kinds:

    ``"drop_after_commit"``
        process the request fully (a create is committed), then close the
        connection without answering.
    ``"reset_before"``
        close the connection before processing anything.
    ``"status"``
        answer ``status`` (429 or 5xx) with an error body, and ``Retry-After``
        if ``retry_after`` is given, without processing anything.
    ``"garbage"``
        process the request (a create is committed), then answer 200 with a
        body that is not JSON.
    ``"delay"``
        sleep ``delay`` seconds, then process and answer normally (for a
        create, the ``Idempotency-Key`` is held while it sleeps).
    ``"headers"``
        process and answer normally, with ``headers`` added to the answer
        (a ``Date`` given there replaces the provider's own): hostile or stale
        ``Date`` and ``Retry-After`` values, for instance.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[list[Any]] = []  # [Fault, remaining uses]
        self._log: list[FaultRecord] = []

    def add(
        self,
        kind: str,
        *,
        on: str = "any",
        times: int = 1,
        status: int = 503,
        retry_after: float | str | None = None,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue a fault for the next ``times`` exchanges of kind ``on``."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, not {kind!r}")
        if on not in EXCHANGES:
            raise ValueError(f"'on' must be one of {EXCHANGES}, not {on!r}")
        if not isinstance(times, int) or times < 1:
            raise ValueError(f"times must be a positive integer, not {times!r}")
        if kind == "status" and status != 429 and not 500 <= status <= 599:
            raise ValueError(f"a status fault answers 429 or 5xx, not {status!r}")
        if delay < 0 or not math.isfinite(delay):
            raise ValueError(f"delay must be a non-negative number of seconds, not {delay!r}")
        pairs = tuple((headers or {}).items())
        if kind == "headers" and not pairs:
            raise ValueError("a headers fault needs headers={name: value, ...}")
        for name, value in pairs:
            if not (isinstance(name, str) and isinstance(value, str)) or any(
                ch in "\r\n" for ch in name + value
            ):
                raise ValueError(f"a fault header must be one line of text: {name!r}: {value!r}")
        fault = Fault(
            kind=kind, on=on, status=status, retry_after=retry_after, delay=delay, headers=pairs
        )
        with self._lock:
            self._queue.append([fault, times])

    def take(self, exchange: str, path: str = "") -> Fault | None:
        """Consume the first queued fault that matches ``exchange``, if any."""
        with self._lock:
            for entry in self._queue:
                fault: Fault = entry[0]
                if fault.on in ("any", exchange):
                    entry[1] -= 1
                    if entry[1] == 0:
                        self._queue.remove(entry)
                    self._log.append(
                        FaultRecord(
                            kind=fault.kind,
                            exchange=exchange,
                            path=path,
                            status=fault.status if fault.kind == "status" else None,
                            at=time.monotonic(),
                        )
                    )
                    logger.info("injecting fault %s into %s %s", fault.kind, exchange, path)
                    return fault
        return None

    @property
    def log(self) -> list[FaultRecord]:
        """Every fault injected so far, in order."""
        with self._lock:
            return list(self._log)

    @property
    def pending(self) -> int:
        """How many fault uses are still queued."""
        with self._lock:
            return sum(entry[1] for entry in self._queue)

    def clear(self) -> None:
        """Drop every queued fault and the log."""
        with self._lock:
            self._queue.clear()
            self._log.clear()


class Stats:
    """Counts of exchanges received, for assertions like "exactly one create was sent".

    Attributes: ``creates``, ``polls``, ``cancels``, ``decisions``, ``lists``
    (requests received, faulted ones included), ``created`` (new requests
    made), ``replays`` (creates answered from an idempotency key).
    """

    _NAMES = ("creates", "polls", "cancels", "decisions", "lists", "created", "replays")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def incr(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def __getattr__(self, name: str) -> int:
        if name in Stats._NAMES:
            with self._lock:
                return self._counts[name]
        raise AttributeError(name)

    def snapshot(self) -> dict[str, int]:
        """All counters as a dict."""
        with self._lock:
            return {name: self._counts[name] for name in Stats._NAMES}

    def reset(self) -> None:
        """Set every counter to zero."""
        with self._lock:
            self._counts.clear()

    def __repr__(self) -> str:
        return f"Stats({self.snapshot()})"



_TESTING_TABLE = """
CREATE TABLE IF NOT EXISTS testing_credentials (
    kind  TEXT PRIMARY KEY,
    token TEXT NOT NULL
)
"""

class LocalProvider:
    """The local provider, running in-process on 127.0.0.1, driven by the test.

    :param db: ``":memory:"`` (default) or a SQLite file path.
    :param clock_offset: how far the provider's clock is ahead of the system's
        (negative: behind). Settable later through :attr:`clock_offset`.
    :param policy: decides each new request in a background thread, e.g.
        :func:`approve_after` ``(0.1)``; settable later through :attr:`policy`.
    :param poll_cap: the most a long poll waits, in seconds.

    Public attributes: :attr:`url`, :attr:`credential` (an instance
    credential), :attr:`reviewer_credential`, :attr:`faults`, :attr:`stats`,
    :attr:`store`, :attr:`server`.
    """

    def __init__(
        self,
        db: str = ":memory:",
        *,
        clock_offset: timedelta = timedelta(0),
        policy: Policy | Callable[[LocalProvider, ApprovalRequest], None] | None = None,
        poll_cap: float = DEFAULT_POLL_CAP,
    ) -> None:
        self.db = str(db)
        self.clock_offset = clock_offset
        self.policy = policy
        self._memory = self.db == ":memory:"
        self._exiting = threading.Event()
        self._running = threading.Event()
        self._policy_thread: threading.Thread | None = None
        self._returned: set[str] = set()
        self._policy_seen: set[str] = set()
        self._lock = threading.Lock()

        store = Store(self.db, clock=self._now)
        self.credential, self.reviewer_credential = _testing_credentials(store)
        if self._memory:
            # The server must not close an in-memory store on stop(): it is all there is.
            self._server = ProviderServer(store, poll_cap=poll_cap)
        else:
            store.close()
            self._server = ProviderServer(self.db, clock=self._now, poll_cap=poll_cap)
        self._memory_store = store if self._memory else None
        self._faults_tmp = Faults()
        self._stats_tmp = Stats()

    def _now(self) -> datetime:
        return utcnow() + self.clock_offset

    def __repr__(self) -> str:
        # Never the credentials.
        return f"LocalProvider(url={self.url!r}, db={self.db!r})"

    # ------------------------------------------------------------------ properties

    @property
    def url(self) -> str:
        """The provider's base URL, ``http://127.0.0.1:PORT`` (kept across restarts)."""
        return self._server.url

    @property
    def server(self) -> ProviderServer:
        """The underlying :class:`~approval_guard.provider.ProviderServer`."""
        return self._server

    @property
    def store(self) -> Store:
        """The current store (a new object after a restart on a file)."""
        return self._server.store

    @property
    def faults(self) -> Faults:
        """Fault injection: ``provider.faults.add("drop_after_commit", on="create")``."""
        return self._faults_tmp

    @property
    def stats(self) -> Stats:
        """Exchange counters: ``provider.stats.creates``, ``.polls``, ``.cancels`` ..."""
        return self._stats_tmp

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LocalProvider:
        """Start serving (again, after :meth:`stop`: same port, same database)."""
        self._server.start()
        self._running.set()
        if self._policy_thread is None:
            self._policy_thread = threading.Thread(
                target=self._policy_loop, name="approval-guard-policy", daemon=True
            )
            self._policy_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, as a killed provider would: open connections are cut."""
        self._running.clear()
        self._server.stop()

    def close(self) -> None:
        """Stop for good and release the database."""
        self._exiting.set()
        self.stop()
        self._running.set()  # let the policy thread see _exiting
        if self._memory_store is not None:
            self._memory_store.close()
        if self._policy_thread is not None:
            self._policy_thread.join(5)

    def __enter__(self) -> LocalProvider:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    def requests(self, status: str | None = None) -> list[ApprovalRequest]:
        """Every request (or those with ``status``), newest first."""
        return self.store.list_requests(status=status)

    def get(self, request_id: str) -> ApprovalRequest:
        """The current state of one request; ``LookupError`` if unknown."""
        request = self.store.get_request(request_id)
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    def history(self, request_id: str) -> History:
        """A request's audit trail; ``LookupError`` if unknown."""
        history = self.store.history(request_id)
        if history is None:
            raise LookupError(f"no request {request_id!r}")
        return history

    def next_request(self, timeout: float = 5.0) -> ApprovalRequest:
        """Block until a pending request appears that this method has not returned before.

        Oldest first. Raises ``TimeoutError`` after ``timeout`` seconds.
        """
        return self._next_unseen(self._returned, timeout)

    def wait_for_polls(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` long polls are waiting; False on timeout."""
        return self._server.wait_for_waiting_polls(n, timeout)

    def _next_unseen(self, seen: set[str], timeout: float) -> ApprovalRequest:
        end = time.monotonic() + timeout
        while True:
            store = self.store
            seq = store.seq
            for request in reversed(store.list_requests(status=PENDING)):
                with self._lock:
                    if request.id not in seen:
                        seen.add(request.id)
                        return request
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no new pending request within {timeout} s")
            if not self._running.is_set():
                raise StoreClosedError("the provider is stopped")
            # Sleeps until something changes: no polling.
            store.wait_for_change(
                after=seq, timeout=remaining, should_stop=lambda: not self._running.is_set()
            )

    # ------------------------------------------------------------------ deciding

    def _reviewer(self) -> Credential:
        reviewer = self.store.authenticate(self.reviewer_credential)
        assert reviewer is not None, "the testing reviewer credential was revoked"
        return reviewer

    def approve(
        self,
        request_id: str,
        *,
        note: str | None = None,
        valid_for: Validity | None = None,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> ApprovalRequest:
        """Approve a pending request, as the testing reviewer.

        ``valid_for`` is a duration string, a ``timedelta`` or seconds (default
        ``5m``); zero or negative makes an approval that has already expired.
        ``expires_at`` sets the expiry outright. ``arguments`` is the whole
        arguments object with the reviewer's edits applied (API 1.1; only names
        the request lists as ``editable`` may change, else ``ValueError``).
        Raises ``NotPendingError`` if not pending, ``LookupError`` if unknown.
        """
        request = self.store.decide(
            request_id,
            reviewer=self._reviewer(),
            status=APPROVED,
            note=note,
            valid_for=to_timedelta("5m" if valid_for is None else valid_for, name="valid_for"),
            expires_at=expires_at,
            arguments=arguments,
        )
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    def deny(self, request_id: str, note: str | None = None) -> ApprovalRequest:
        """Deny a pending request, as the testing reviewer (``NotPendingError`` if not pending)."""
        request = self.store.decide(request_id, reviewer=self._reviewer(), status=DENIED, note=note)
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    def cancel(self, request_id: str, reason: str | None = None) -> ApprovalRequest:
        """Cancel a pending request, as if its instance withdrew it."""
        request = self.store.cancel(request_id, owner=self._reviewer(), reason=reason)
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    # ------------------------------------------------------------------ policy

    def _sleep(self, seconds: float) -> bool:
        """Sleep, cut short by close(); True if the provider is still open."""
        return not self._exiting.wait(seconds)

    def _policy_loop(self) -> None:
        while not self._exiting.is_set():
            self._running.wait()
            if self._exiting.is_set():
                return
            try:
                request = self._next_unseen(self._policy_seen, 3600.0)
            except (StoreClosedError, TimeoutError):
                continue
            except Exception:
                logger.exception("the testing policy loop failed; retrying")
                continue
            policy = self.policy
            if policy is None:
                continue
            threading.Thread(
                target=self._apply_policy,
                args=(policy, request),
                name="approval-guard-policy-decision",
                daemon=True,
            ).start()

    def _apply_policy(
        self, policy: Callable[[LocalProvider, ApprovalRequest], None], request: ApprovalRequest
    ) -> None:
        try:
            policy(self, request)
        except (NotPendingError, StoreClosedError):
            pass
        except Exception:
            logger.exception("a testing policy raised for request %s", request.id)


def _testing_credentials(store: Store) -> tuple[str, str]:
    """The testing instance and reviewer tokens of this database, made on first use."""
    with store.transaction() as db:
        db.execute(_TESTING_TABLE)
        rows = dict(db.execute("SELECT kind, token FROM testing_credentials").fetchall())
    tokens: dict[str, str] = {}
    for kind in (INSTANCE, REVIEWER):
        token = rows.get(kind)
        credential = store.authenticate(token) if token else None
        if token is None or credential is None or credential.kind != kind:
            token = store.create_credential(kind, f"testing {kind}")
            with store.transaction() as db:
                db.execute(
                    "INSERT OR REPLACE INTO testing_credentials (kind, token) VALUES (?, ?)",
                    (kind, token),
                )
        tokens[kind] = token
    return tokens[INSTANCE], tokens[REVIEWER]


__all__ = ["LocalProvider", "Policy", "Timings", "approve_after", "deny_after"]
