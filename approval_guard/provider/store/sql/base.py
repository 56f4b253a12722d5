"""The store's common ground: what every SQL backend provides, and rows made into models.

The store's behaviour is written once, in the mixins of ``sql/credentials.py``,
``sql/requests.py``, ``sql/decisions.py`` and ``sql/queries.py``, over this base.
A backend (``sqlite_db.py``, ``postgres_db.py``) supplies two context managers:
``_reading()``, a connection for one or more reads, and ``_writing()``, one
transaction (a :class:`Tx`) that is committed on exit before the change feed
hears of it. Queries are written in SQLite's dialect with ``?`` markers and bare
table names; the PostgreSQL backend translates them.

Times are kept as integer microseconds since the epoch, in both backends.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from approval_guard._codec.exact_json import canonical_json, load_stored
from approval_guard._codec.wire_models import Decision
from approval_guard.provider.store.feed import ChangeFeed, Subscriber
from approval_guard.provider.store.models import (
    Approval,
    Clock,
    Credential,
    IdempotencyKeyInUse,
    StoreClosedError,
    StoredRequest,
    system_clock,
)

if TYPE_CHECKING:
    from approval_guard.provider.store.group_commit import GroupCommit

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class Cursor(Protocol):
    """The part of a DB-API cursor the store uses; rows index by position and by name."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Reader(Protocol):
    """A connection the store reads through."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Cursor: ...


class Tx(Reader, Protocol):
    """One write transaction: statements, audit events, and a lock across instances."""

    def event(
        self,
        request_id: str,
        kind: str,
        at: datetime,
        actor_id: str | None,
        detail: dict[str, Any],
    ) -> int:
        """Record an audit event (a change) and return its sequence number."""
        ...

    def lock(self, name: str) -> None:
        """Hold ``name`` until the transaction ends, against every instance on the database."""
        ...


class WriteTx(Tx, Protocol):
    """A backend's write transaction as a grouped write ends it: what it changed."""

    seq: int
    changed: list[str]
    events: list[tuple[str, str, datetime, int]]


W = TypeVar("W", bound=WriteTx)


def returned(cursor: Cursor) -> Any:
    """The one row a ``RETURNING`` statement gave, or None; the cursor is read to its end.

    Read to the end, so SQLite finishes the statement before the commit.
    """
    rows = cursor.fetchall()
    return rows[0] if rows else None


class _IdleConnections(Protocol):
    def get_nowait(self) -> Any: ...


def close_idle(idle: _IdleConnections) -> None:
    """Close every connection waiting in a store's idle queue (as the store closes)."""
    while True:
        try:
            idle.get_nowait().close()
        except queue.Empty:
            return


def to_us(moment: datetime) -> int:
    """A datetime as the integer microseconds the tables keep."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def from_us(value: int | None) -> datetime | None:
    """The datetime of a stored microsecond count (None stays None)."""
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def sha256(text: str) -> str:
    """The hex sha256 of a text: how tokens and session ids are kept."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def credential_from_row(row: Any) -> Credential:
    """A ``credentials`` row as a :class:`Credential`."""
    created = from_us(row["created_at"])
    assert created is not None
    return Credential(
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        created_at=created,
        revoked_at=from_us(row["revoked_at"]),
        roles=tuple(load_stored(row["roles"])) if row["roles"] else (),
    )


def request_from_row(row: Any) -> StoredRequest:
    """A ``requests`` row as a :class:`StoredRequest`, JSON read back exactly."""
    decision = None
    if row["decision_status"] is not None:
        decided_at = from_us(row["decided_at"])
        assert decided_at is not None
        edited = row["decision_arguments"]
        decision = Decision(
            status=row["decision_status"],
            note=row["decision_note"],
            decided_at=decided_at,
            expires_at=from_us(row["expires_at"]),
            arguments=None if edited is None else load_stored(edited),
            decided_by=row["decided_by_name"],
        )
    created = from_us(row["created_at"])
    deadline = from_us(row["deadline_at"])
    assert created is not None and deadline is not None
    editable = row["editable"]
    return StoredRequest(
        id=row["id"],
        tool=row["tool"],
        arguments=load_stored(row["arguments"]),
        timeout=row["timeout"],
        status=row["status"],
        created_at=created,
        deadline_at=deadline,
        decision=decision,
        cancelled_at=from_us(row["cancelled_at"]),
        editable=() if editable is None else tuple(load_stored(editable)),
        requested_by=row["requested_by"],
        approvals_required=row["approvals_required"] or 1,
        approvals=_approvals(row["approval_list"]),
        decision_grant=_grant_summary(row),
        batch=row["batch"],
        context=row["context"],
        redacted=() if row["redacted"] is None else tuple(load_stored(row["redacted"])),
    )


def _grant_summary(row: Any) -> dict[str, Any] | None:
    try:
        text = row["decision_grant"]
    except (IndexError, KeyError):  # a row read without the column
        return None
    return None if text is None else dict(load_stored(text))


def _approvals(text: str | None) -> tuple[Approval, ...]:
    out = []
    for item in load_stored(text) if text else ():
        at = from_us(item["at"])
        assert at is not None
        out.append(Approval(by=item["by"], at=at))
    return tuple(out)


def approvals_text(approvals: Sequence[Approval]) -> str:
    """The ``approval_list`` column: the counted approvals, in order."""
    return canonical_json([{"by": one.by, "at": to_us(one.at)} for one in approvals])


def insert_audit(
    tx: Reader,
    *,
    at: datetime,
    actor: str,
    source: str,
    action: str,
    request_id: str | None,
    detail: dict[str, Any],
) -> None:
    """Append one audit row in this transaction (it commits, or not, with the change)."""
    tx.execute(
        "INSERT INTO audit (at, actor, source, action, request_id, detail) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (to_us(at), actor, source, action, request_id, canonical_json(detail)),
    )


class SQLStoreBase:
    """State and plumbing shared by every store: clock, change feed, in-flight keys, closing."""

    #: The column that orders requests created at the same instant (insertion order).
    _ORDER_KEY = "rowid"
    #: Appended to a claim's inner SELECT (PostgreSQL: ``FOR UPDATE SKIP LOCKED``).
    _SKIP_LOCKED = ""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or system_clock
        self._closed = False
        self._feed = ChangeFeed()
        self._in_flight: set[tuple[str, str]] = set()
        self._in_flight_lock = threading.Lock()

    # ------------------------------------------------------------------ the backend's part

    def _reading(self) -> contextlib.AbstractContextManager[Reader]:
        raise NotImplementedError

    def _writing(self) -> contextlib.AbstractContextManager[Tx]:
        raise NotImplementedError

    def _before_commit(self, tx: Tx, events: Sequence[tuple[str, str, datetime, int]]) -> None:
        """Called by ``_writing`` inside the transaction, with its ``(request, kind, at, seq)``.

        Nothing here; the webhook outbox queues its rows in it.
        """
        del tx, events

    def _decide_at_create(
        self, tx: Tx, request: StoredRequest, owner: Credential, rules: Any, source: str
    ) -> Any:
        """Inside a create's transaction: the row a rule or grant decided, else None.

        Nothing here; the grants' mixin decides what they cover.
        """
        del tx, request, owner, rules, source
        return None

    @contextlib.contextmanager
    def _grouped_write(self, group: GroupCommit, make_tx: Callable[[], W]) -> Iterator[W]:
        """One write in ``group``'s batch; returns once the batch holding it committed.

        ``make_tx`` is called with the writer's lock held.
        """
        batch, opened = group.join()
        failure = None
        try:
            tx = make_tx()
            yield tx
            # In the member's own part of the batch: its outbox rows commit, or not, with it.
            self._before_commit(tx, tx.events)
            batch.keep(tx.seq, tx.changed)
        except BaseException as exc:
            failure = exc
        # Returns once the batch holding this write committed (and the feed heard of it).
        group.leave(batch, opened, failure)

    # ------------------------------------------------------------------ common

    def now(self) -> datetime:
        """The provider's current time, truncated to milliseconds (what the wire shows)."""
        moment = self._clock().astimezone(timezone.utc)
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000)

    @property
    def closed(self) -> bool:
        """True once ``close`` was called."""
        return self._closed

    def _is_closed(self) -> bool:
        # A method, not the property: the flag changes under other threads' feet.
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    def wake_all(self) -> None:
        """End every waiting poll and change-wait now (used when the server stops)."""
        self._feed.wake_all()

    @contextlib.contextmanager
    def claim_key(self, owner_id: str, key: str) -> Iterator[None]:
        """Hold ``(owner, key)`` as in flight; a second holder gets :class:`IdempotencyKeyInUse`.

        In this process only: across instances the database decides (one create wins).
        """
        slot = (owner_id, key)
        with self._in_flight_lock:
            if slot in self._in_flight:
                raise IdempotencyKeyInUse("a request with this Idempotency-Key is in progress")
            self._in_flight.add(slot)
        try:
            yield
        finally:
            with self._in_flight_lock:
                self._in_flight.discard(slot)

    # ------------------------------------------------------------------ change feed

    @property
    def seq(self) -> int:
        """The change sequence: the number of the last create/decide/cancel/expire event."""
        return self._feed.seq

    def wait_for_change(
        self, *, after: int, timeout: float, should_stop: Callable[[], bool] | None = None
    ) -> int:
        """Block until the change sequence exceeds ``after``; return it.

        Returns early (with the unchanged sequence) after ``timeout`` seconds,
        when :meth:`wake_all` is called, or when ``should_stop()`` is true
        (checked under the same lock :meth:`wake_all` notifies with, so a stop
        flag set before ``wake_all()`` is never missed).
        """
        return self._feed.wait_for_change(after=after, timeout=timeout, should_stop=should_stop)

    def expecting(
        self, request_id: str, *, owner_id: str | None
    ) -> contextlib.AbstractContextManager[Callable[[], StoredRequest | None]]:
        """While a long poll waits: its request's state, if read ahead when another
        instance settled it (PostgreSQL's listener does; otherwise always None)."""
        return self._feed.expecting(request_id, owner_id)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(seq, request_ids)`` after every committed change; returns unsubscribe.

        Called from whichever thread saw the change, so it must be cheap; an
        exception it raises is logged and swallowed. Empty ``request_ids`` means
        "anything may have changed: re-read".
        """
        return self._feed.subscribe(callback)

    @property
    def waiting_polls(self) -> int:
        """How many polls are waiting right now (for tests and metrics)."""
        return self._feed.waiting

    def wait_for_waiting_polls(self, n: int, timeout: float) -> bool:
        """Block until at least ``n`` polls are waiting; False on timeout."""
        return self._feed.wait_for_waiting(n, timeout)
