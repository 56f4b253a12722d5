"""The local provider's state: SQLite (WAL) plus in-process wake-ups for long polls.

One :class:`Store` owns one ``sqlite3`` connection, used under a lock; every
write is committed before anyone is told about it, so a ``kill -9`` loses
nothing that was answered (WAL with ``synchronous=NORMAL`` survives a process
crash; only an operating-system crash may lose the last transactions).

Time is the store's ``now`` callable (aware UTC ``datetime``), injectable so
tests can run the provider ahead of or behind the adapter. A request's status
is derived from that wall clock: a ``pending`` request whose ``deadline_at`` has
passed is ``expired``; the transition is written (with an audit event) the first
time anyone looks, so deadlines keep running while the server is down.

Public API, for the HTTP layer and the CLI::

    store = Store("approvals.sqlite3")            # or ":memory:"
    tokens = store.ensure_initial_credentials()   # FirstStartTokens | None
    token = store.create_credential("reviewer", "alice")
    cred = store.authenticate(token)              # Credential | None
    result = store.create_request(owner=cred, idempotency_key=..., tool=..., arguments=...,
                                  timeout_seconds=..., editable=("amount",))
    request = store.poll(request_id, viewer=cred, wait=30.0)
    store.decide(request_id, reviewer=cred, status="approved", note=None, valid_for=300,
                 arguments=None)                  # or the whole arguments, edits applied
    new = with_edits(request, {"amount": "2500"})  # JSON texts -> the whole arguments
    store.cancel(request_id, owner=cred, reason=None)
    store.list_requests(status="pending")
    store.history(request_id)
    store.wait_for_change(after=seq, timeout=25.0)
    store.close()

Requests come back as :class:`StoredRequest`: the wire model plus the
``editable`` names (API 1.1). A decision's ``arguments`` (the reviewer's edits)
are kept only when they differ from the request's own.

Errors are the exceptions at the top of this module; ``None`` means "not found".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from approval_guard._duration import format_duration
from approval_guard._json import (
    MAX_JSON_DEPTH,
    InvalidJSON,
    JSONNumber,
    canonical_json,
    check_json_value,
    dump_json,
    load_json,
    load_stored,
)
from approval_guard._now import utcnow
from approval_guard._redact import REDACTED_KEY
from approval_guard._redact import holds_marker_key as contains_redacted
from approval_guard._wire import (
    APPROVED,
    CANCELLED,
    DENIED,
    EXPIRED,
    PENDING,
    STATUSES,
    ApprovalRequest,
    Decision,
    format_timestamp,
)

logger = logging.getLogger("approval_guard.provider")

Clock = Callable[[], datetime]

INSTANCE = "instance"
REVIEWER = "reviewer"
CREDENTIAL_KINDS = (INSTANCE, REVIEWER)
_TOKEN_PREFIX = {INSTANCE: "agi_", REVIEWER: "agr_"}

#: Idempotency keys are kept at least this long (the API promises 24 hours).
KEY_RETENTION = timedelta(hours=24)
#: How long a review-page login session lasts.
SESSION_LIFETIME = timedelta(hours=12)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SCHEMA_VERSION = "2"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS credentials (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('instance', 'reviewer')),
    name         TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE TABLE IF NOT EXISTS requests (
    id              TEXT PRIMARY KEY,
    owner_id        TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body_sha256     TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    timeout         TEXT NOT NULL,
    status          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    deadline_at     INTEGER NOT NULL,
    decision_status TEXT,
    decision_note   TEXT,
    decided_at      INTEGER,
    expires_at      INTEGER,
    decided_by      TEXT,
    cancelled_at    INTEGER,
    cancel_reason   TEXT,
    poll_count      INTEGER NOT NULL DEFAULT 0,
    last_polled_at  INTEGER,
    editable        TEXT,
    decision_arguments TEXT
);
CREATE INDEX IF NOT EXISTS requests_by_status ON requests (status, deadline_at);
CREATE INDEX IF NOT EXISTS requests_by_created ON requests (created_at);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    owner_id    TEXT NOT NULL,
    key         TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (owner_id, key)
);
CREATE TABLE IF NOT EXISTS events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    at         INTEGER NOT NULL,
    type       TEXT NOT NULL,
    actor_id   TEXT,
    detail     TEXT
);
CREATE INDEX IF NOT EXISTS events_by_request ON events (request_id, seq);
CREATE TABLE IF NOT EXISTS sessions (
    id_sha256     TEXT PRIMARY KEY,
    credential_id TEXT NOT NULL,
    csrf_token    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
"""

# Columns added since schema 1; a database made before them gets them on open.
_ADDED_COLUMNS = (("requests", "editable", "TEXT"), ("requests", "decision_arguments", "TEXT"))


# --------------------------------------------------------------------------- errors


class StoreError(Exception):
    """Base of the store's refusals; the HTTP layer maps each to a status code."""


class IdempotencyKeyReused(StoreError):
    """The key was used before with a different body (HTTP 422); carries the first request.

    ``request`` is the current state of the request first created with this key
    (None only if it could not be read), for the credential that created it.
    """

    def __init__(self, message: str, request: StoredRequest | None = None) -> None:
        super().__init__(message)
        self.request = request


class IdempotencyKeyInUse(StoreError):
    """The first request with this key is still being processed (HTTP 409)."""


class NotPendingError(StoreError):
    """The request is no longer pending (HTTP 409 ``not_pending``); carries its state."""

    def __init__(self, request: StoredRequest) -> None:
        super().__init__(f"request {request.id} is {request.status}, not pending")
        self.request = request


class InvalidEdit(StoreError, ValueError):
    """An ``editable`` list or a reviewer's edit the store refuses (HTTP 400)."""


class UnknownRequest(StoreError, LookupError):
    """An id given as a position (a list's ``before``) is not a request's."""


class StoreClosedError(StoreError):
    """The store was closed (the server is stopping)."""


# --------------------------------------------------------------------------- models


@attrs.frozen
class Credential:
    """A credential as stored: never the token, only who it is."""

    id: str
    kind: str
    name: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def is_reviewer(self) -> bool:
        return self.kind == REVIEWER


@attrs.frozen
class FirstStartTokens:
    """Plaintext tokens generated on first start; shown once, never stored.

    The ``repr`` hides them so they cannot leak into a log line by accident.
    """

    instance: str = attrs.field(repr=False)
    reviewer: str = attrs.field(repr=False)


@attrs.frozen
class StoredRequest(ApprovalRequest):
    """A request as the store keeps it: the wire model plus API 1.1's ``editable`` names.

    ``editable`` is sorted (it is a set of top-level argument names); empty
    means the reviewer may change nothing.
    """

    editable: tuple[str, ...] = ()


@attrs.frozen
class CreateResult:
    """What :meth:`Store.create_request` did: ``created`` False means an idempotent replay."""

    request: StoredRequest
    created: bool


@attrs.frozen
class Annotation:
    """What the review page shows beside a request: its decider's name, a cancel reason."""

    decided_by: str | None
    cancel_reason: str | None


@attrs.frozen
class AuditEvent:
    """One entry of a request's history. ``actor`` is a credential id and name, never a token."""

    seq: int
    at: datetime
    type: str
    actor: Credential | None
    detail: dict[str, Any]


@attrs.frozen
class History:
    """A request's audit trail: its events, who owns it and how often it was polled."""

    request: StoredRequest
    owner: Credential | None
    poll_count: int
    last_polled_at: datetime | None
    events: list[AuditEvent]


@attrs.frozen
class Session:
    """A review-page login session (the id itself is only known to the browser)."""

    credential: Credential
    csrf_token: str = attrs.field(repr=False)
    expires_at: datetime


# --------------------------------------------------------------------------- helpers


#: A given token's length bounds: long enough to be a secret, short enough for a header.
GIVEN_TOKEN_LENGTH = (24, 512)


def check_given_token(token: object, kind: str) -> None:
    """A known token to store: 24 to 512 printable ASCII characters without spaces.

    The message never shows the token: it is a secret.
    """
    low, high = GIVEN_TOKEN_LENGTH
    if (
        not isinstance(token, str)
        or not low <= len(token) <= high
        or not all(32 < ord(ch) < 127 for ch in token)
    ):
        raise ValueError(
            f"a given {kind} token must be {low} to {high} printable ASCII characters "
            "without spaces"
        )


def system_clock() -> datetime:
    """The default clock: the system's wall time in UTC."""
    return utcnow()


def _to_us(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _from_us(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# The exact JSON codec lives in approval_guard._json (one codec for the package);
# its names are re-exported here for the server and older importers.


def body_hash(
    tool: str, arguments: dict[str, Any], timeout_seconds: int, editable: Sequence[str] = ()
) -> str:
    """The hash an idempotency key is bound to.

    The timeout is hashed in canonical form, so ``"90s"`` and ``"1m30s"`` count
    as the same body: they mean the same request. So is ``editable``, a set of
    names: sorted, and left out when empty, so a body without it hashes as it
    always did (and ``"editable": []`` is the same body as none).
    """
    body: dict[str, Any] = {
        "tool": tool,
        "arguments": arguments,
        "timeout": format_duration(timeout_seconds),
    }
    if editable:
        body["editable"] = sorted(editable)
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- edits (API 1.1)
#
# A reviewer may change the top-level arguments a request lists as editable,
# and nothing else. Values are compared as canonical JSON text, never with
# Python's ==, which holds True == 1 == 1.0 and would let a type change pass as
# "unchanged" (or hide that a non-editable value was changed).

#: The most names one request may list as editable.
MAX_EDITABLE = 100


def _same(left: object, right: object) -> bool:
    return canonical_json(left) == canonical_json(right)


def _quoted(name: str) -> str:
    return json.dumps(name)[:80]


def check_editable(arguments: dict[str, Any], editable: object) -> tuple[str, ...]:
    """The ``editable`` names of a create body, sorted; raises :class:`InvalidEdit`.

    Each must be a string naming a top-level key of ``arguments`` whose value
    holds nothing redacted, listed once, at most :data:`MAX_EDITABLE` of them.
    ``None`` means none.
    """
    if editable is None:
        return ()
    if not isinstance(editable, (list, tuple)):
        raise InvalidEdit("'editable' must be a list of argument names")
    if len(editable) > MAX_EDITABLE:
        raise InvalidEdit(f"'editable' may list at most {MAX_EDITABLE} names")
    seen: set[str] = set()
    for name in editable:
        if not isinstance(name, str):
            raise InvalidEdit("'editable' must be a list of argument names (strings)")
        check_json_value(name)
        if name in seen:
            raise InvalidEdit(f"'editable' lists {_quoted(name)} twice")
        seen.add(name)
        if name not in arguments:
            raise InvalidEdit(f"'editable' lists {_quoted(name)}, which is not an argument")
        if contains_redacted(arguments[name]):
            raise InvalidEdit(
                f"'editable' lists {_quoted(name)}, whose value is redacted: "
                "a reviewer cannot edit what they cannot see"
            )
    return tuple(sorted(seen))


def changed_names(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The top-level names whose values differ (added and removed ones included), sorted."""
    names = set(before) | set(after)
    return sorted(
        name
        for name in names
        if name not in before or name not in after or not _same(before[name], after[name])
    )


def check_edit(request: StoredRequest, status: str, arguments: object) -> dict[str, Any] | None:
    """A decision's ``arguments`` as kept, None for no edit; raises :class:`InvalidEdit`.

    Refused: arguments on a denial, on a request without editable names, that
    are not an object, that add, remove or change a name not listed as
    editable, or that put something redacted into an edited value. Arguments
    equal to the request's own are no edit (None).
    """
    if arguments is None:
        return None
    if status != APPROVED:
        raise InvalidEdit("a denial cannot carry 'arguments': only an approval can edit")
    if not isinstance(arguments, dict):
        raise InvalidEdit("'arguments' must be the whole arguments object, edits applied")
    if not request.editable:
        raise InvalidEdit("this request lists no editable arguments, so none may be changed")
    check_json_value(arguments)
    changed = changed_names(request.arguments, arguments)
    for name in changed:
        if name not in request.arguments:
            raise InvalidEdit(f"'arguments' adds {_quoted(name)}, which the request does not have")
        if name not in arguments:
            raise InvalidEdit(f"'arguments' leaves out {_quoted(name)}; send the whole object")
        if name not in request.editable:
            raise InvalidEdit(f"{_quoted(name)} is not editable on this request")
        if contains_redacted(arguments[name]):
            raise InvalidEdit(f"the new value of {_quoted(name)} holds a redaction marker")
    return arguments if changed else None


def with_edits(request: StoredRequest, edits: Mapping[str, str]) -> dict[str, Any]:
    """The request's whole arguments with each ``edits`` name set to its parsed JSON text.

    For the review page's form and a terminal's ``--set NAME=JSON``: each text
    is parsed exactly (:func:`load_json`; ``9007199254740993`` stays that
    integer). Raises :class:`InvalidEdit` for a name that is not editable or a
    text that is not JSON; :meth:`Store.decide` checks the result again.
    """
    out = dict(request.arguments)
    for name, text in edits.items():
        if name not in request.editable:
            raise InvalidEdit(f"{_quoted(name)} is not editable on this request")
        if not isinstance(text, str):
            raise InvalidEdit(f"the new value of {_quoted(name)} must be given as JSON text")
        try:
            # The arguments object is level 1, so a value may nest one level less.
            out[name] = load_json(text, max_depth=MAX_JSON_DEPTH - 1)
        except InvalidJSON as exc:
            raise InvalidEdit(
                f"the new value of {_quoted(name)} is not JSON ({exc}); "
                'write text in double quotes, e.g. "GBP"'
            ) from None
    return out


class _Waiters:
    """Per-request events that wake every waiting poll at once, without polling.

    A poll registers *before* it reads the state, so a decision committed
    between the read and the wait still wakes it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events: dict[str, threading.Event] = {}
        self._refs: dict[str, int] = {}
        self._count = 0

    def register(self, key: str) -> threading.Event:
        with self._cond:
            event = self._events.get(key)
            if event is None:
                event = self._events[key] = threading.Event()
                self._refs[key] = 0
            self._refs[key] += 1
            self._count += 1
            self._cond.notify_all()
            return event

    def unregister(self, key: str, event: threading.Event) -> None:
        with self._cond:
            self._count -= 1
            if self._events.get(key) is event:
                self._refs[key] -= 1
                if self._refs[key] == 0:
                    del self._events[key]
                    del self._refs[key]
            self._cond.notify_all()

    def fire(self, key: str) -> None:
        with self._cond:
            event = self._events.pop(key, None)
            self._refs.pop(key, None)
        if event is not None:
            event.set()

    def fire_all(self) -> None:
        with self._cond:
            events = list(self._events.values())
            self._events.clear()
            self._refs.clear()
        for event in events:
            event.set()

    @property
    def count(self) -> int:
        with self._cond:
            return self._count

    def wait_for_count(self, n: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._count >= n, timeout)


# --------------------------------------------------------------------------- the store


class Store:
    """SQLite-backed provider state. Thread-safe; one instance per process and file.

    :param path: a file path (created if missing) or ``":memory:"``.
    :param clock: returns the provider's "now" as an aware datetime; defaults to
        the system clock. All timestamps and expiry decisions use it.
    """

    def __init__(self, path: str = "approvals.sqlite3", *, clock: Clock | None = None) -> None:
        self.path = str(path)
        self._clock: Clock = clock or system_clock
        self._lock = threading.RLock()
        self._closed = False
        # check_same_thread=False: the connection is shared by the HTTP threads,
        # always under self._lock. isolation_level=None: we issue BEGIN ourselves.
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        with self._lock:
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                # Two stores on one file (a test re-opening it) wait instead of failing.
                self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            self._add_columns()
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (_SCHEMA_VERSION,),
            )
        self._waiters = _Waiters()
        self._subscribers: list[Callable[[int, tuple[str, ...]], None]] = []
        self._change = threading.Condition()
        # Bumped by wake_all(), so change-waiters return when the server stops.
        self._wake_generation = 0
        self._seq = self._max_seq()
        self._in_flight: set[tuple[str, str]] = set()
        self._in_flight_lock = threading.Lock()
        self.prune()

    # ------------------------------------------------------------------ plumbing

    def _add_columns(self) -> None:
        """Give a database made by an older version the columns added since."""
        for table, column, kind in _ADDED_COLUMNS:
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column in present:
                continue
            try:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            except sqlite3.OperationalError as exc:
                # Another process opening the same file may have added it first.
                if "duplicate column" not in str(exc):
                    raise

    def now(self) -> datetime:
        """The provider's current time, truncated to milliseconds (what the wire shows)."""
        moment = self._clock().astimezone(timezone.utc)
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one committed transaction, under the store's lock.

        For small extensions such as :mod:`approval_guard.testing`; the HTTP
        layer uses the methods below.
        """
        with self._lock:
            if self._closed:
                raise StoreClosedError("the store is closed")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _read(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosedError("the store is closed")
        return self._db

    def close(self) -> None:
        """Wake every waiter and close the database. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._db.close()
        self.wake_all()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def _is_closed(self) -> bool:
        # A method, not the property: the flag changes under other threads' feet.
        return self._closed

    def wake_all(self) -> None:
        """End every waiting poll and change-wait now (used when the server stops)."""
        self._waiters.fire_all()
        with self._change:
            self._wake_generation += 1
            self._change.notify_all()

    def _max_seq(self) -> int:
        with self._lock:
            row = self._read().execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
        return int(row[0])

    def _event(
        self,
        db: sqlite3.Connection,
        request_id: str,
        kind: str,
        at: datetime,
        actor_id: str | None,
        detail: dict[str, Any] | None = None,
    ) -> int:
        cursor = db.execute(
            "INSERT INTO events (request_id, at, type, actor_id, detail) VALUES (?, ?, ?, ?, ?)",
            (request_id, _to_us(at), kind, actor_id, canonical_json(detail or {})),
        )
        return int(cursor.lastrowid or 0)

    def _changed(self, seq: int, request_ids: list[str]) -> None:
        """After a commit: wake the polls of these requests and the change-waiters."""
        for request_id in request_ids:
            self._waiters.fire(request_id)
        with self._change:
            self._seq = max(self._seq, seq)
            self._change.notify_all()
        for callback in list(self._subscribers):
            try:
                callback(seq, tuple(request_ids))
            except Exception:
                logger.exception("a change subscriber failed")

    def subscribe(self, callback: Callable[[int, tuple[str, ...]], None]) -> Callable[[], None]:
        """Call ``callback(seq, request_ids)`` after every commit that changes requests."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def prune(self) -> int:
        """Forget idempotency keys older than :data:`KEY_RETENTION` and dead sessions."""
        now = self.now()
        with self.transaction() as db:
            removed = db.execute(
                "DELETE FROM idempotency_keys WHERE created_at < ?",
                (_to_us(now - KEY_RETENTION),),
            ).rowcount
            db.execute("DELETE FROM sessions WHERE expires_at <= ?", (_to_us(now),))
        if removed:
            logger.info("pruned %d idempotency keys older than %s", removed, KEY_RETENTION)
        return int(removed)

    # ------------------------------------------------------------------ credentials

    def create_credential(self, kind: str, name: str, *, token: str | None = None) -> str:
        """Create a credential and return its plaintext token (stored only as a sha256).

        ``kind`` is ``"instance"`` (an adapter: create, read, cancel its own
        requests) or ``"reviewer"`` (a person: list and decide). ``token``: a
        known one to use (see :func:`check_given_token`), else a random one.
        """
        if kind not in CREDENTIAL_KINDS:
            raise ValueError(f"kind must be one of {CREDENTIAL_KINDS}, not {kind!r}")
        if not name:
            raise ValueError("a credential needs a name")
        if token is None:
            token = _TOKEN_PREFIX[kind] + secrets.token_urlsafe(32)
        else:
            check_given_token(token, kind)
        with self.transaction() as db:
            db.execute(
                "INSERT INTO credentials (id, kind, name, token_sha256, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                ("cred_" + secrets.token_hex(6), kind, name, _sha256(token), _to_us(self.now())),
            )
        logger.info("created %s credential %r", kind, name)
        return token

    def ensure_initial_credentials(
        self, *, instance_token: str | None = None, reviewer_token: str | None = None
    ) -> FirstStartTokens | None:
        """On a store with no credentials at all, create one of each kind.

        Returns their plaintext tokens (to be shown once), or None if any
        credential already existed. Given tokens (containers, CI) are used on
        a first start; on a later one each must already be a live credential
        of its kind, else ``ValueError`` (a typo must not go unnoticed).
        """
        given = ((INSTANCE, instance_token), (REVIEWER, reviewer_token))
        for kind, token in given:
            if token is not None:
                check_given_token(token, kind)
        with self._lock:
            count = self._read().execute("SELECT COUNT(*) FROM credentials").fetchone()[0]
            if count:
                for kind, token in given:
                    known = None if token is None else self.authenticate(token)
                    if token is not None and (known is None or known.kind != kind):
                        raise ValueError(
                            f"the given {kind} token is not a live {kind} credential of this "
                            "database (known tokens are set only on its first start)"
                        )
                return None
            return FirstStartTokens(
                instance=self.create_credential(INSTANCE, "instance", token=instance_token),
                reviewer=self.create_credential(REVIEWER, "reviewer", token=reviewer_token),
            )

    def authenticate(self, token: str) -> Credential | None:
        """The live credential whose token this is, or None."""
        if not token:
            return None
        with self._lock:
            row = (
                self._read()
                .execute(
                    "SELECT * FROM credentials WHERE token_sha256 = ? AND revoked_at IS NULL",
                    (_sha256(token),),
                )
                .fetchone()
            )
        return None if row is None else _credential(row)

    def credential(self, credential_id: str) -> Credential | None:
        """A credential by id (revoked ones included), or None."""
        with self._lock:
            row = (
                self._read()
                .execute("SELECT * FROM credentials WHERE id = ?", (credential_id,))
                .fetchone()
            )
        return None if row is None else _credential(row)

    def list_credentials(self) -> list[Credential]:
        """Every credential, oldest first (without tokens, which are not stored)."""
        with self._lock:
            rows = self._read().execute("SELECT * FROM credentials ORDER BY created_at").fetchall()
        return [_credential(row) for row in rows]

    def revoke_credential(self, credential_id: str) -> bool:
        """Revoke a credential (and its review sessions). False if there was none live."""
        with self.transaction() as db:
            changed = db.execute(
                "UPDATE credentials SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (_to_us(self.now()), credential_id),
            ).rowcount
            db.execute("DELETE FROM sessions WHERE credential_id = ?", (credential_id,))
        return bool(changed)

    # ------------------------------------------------------------------ sessions

    def create_session(self, reviewer: Credential) -> tuple[str, Session]:
        """A review-page session for a reviewer: ``(session id for the cookie, session)``."""
        if not reviewer.is_reviewer:
            raise ValueError("only a reviewer credential can open a review session")
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        now = self.now()
        expires = now + SESSION_LIFETIME
        with self.transaction() as db:
            db.execute(
                "INSERT INTO sessions (id_sha256, credential_id, csrf_token, created_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?)",
                (_sha256(session_id), reviewer.id, csrf, _to_us(now), _to_us(expires)),
            )
        return session_id, Session(credential=reviewer, csrf_token=csrf, expires_at=expires)

    def session(self, session_id: str) -> Session | None:
        """The live session with this id whose credential is still live, or None."""
        if not session_id:
            return None
        with self._lock:
            row = (
                self._read()
                .execute(
                    "SELECT s.csrf_token, s.expires_at, c.* FROM sessions s "
                    "JOIN credentials c ON c.id = s.credential_id "
                    "WHERE s.id_sha256 = ? AND s.expires_at > ? AND c.revoked_at IS NULL",
                    (_sha256(session_id), _to_us(self.now())),
                )
                .fetchone()
            )
        if row is None:
            return None
        expires = _from_us(row["expires_at"])
        assert expires is not None
        return Session(
            credential=_credential(row), csrf_token=row["csrf_token"], expires_at=expires
        )

    # ------------------------------------------------------------------ requests

    @contextlib.contextmanager
    def claim_key(self, owner_id: str, key: str) -> Iterator[None]:
        """Hold ``(owner, key)`` as in flight; a second holder gets :class:`IdempotencyKeyInUse`."""
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

    def replay(self, owner: Credential, idempotency_key: str, digest: str) -> StoredRequest | None:
        """The current state of the request this key created, or None for a new key.

        Raises :class:`IdempotencyKeyReused` when the key was used with another body.
        """
        with self._lock:
            row = (
                self._read()
                .execute(
                    "SELECT body_sha256, request_id FROM idempotency_keys "
                    "WHERE owner_id = ? AND key = ?",
                    (owner.id, idempotency_key),
                )
                .fetchone()
            )
            if row is None:
                return None
            if row["body_sha256"] != digest:
                raise IdempotencyKeyReused(
                    "this Idempotency-Key was used with a different body; nothing was created",
                    self._get(row["request_id"]),
                )
            return self._get(row["request_id"])

    def create_request(
        self,
        *,
        owner: Credential,
        idempotency_key: str,
        tool: str,
        arguments: dict[str, Any],
        timeout_seconds: int,
        editable: Sequence[str] | None = None,
    ) -> CreateResult:
        """Create a pending request, or replay the one this key already made.

        The caller should hold :meth:`claim_key` around this (the HTTP layer
        does) so that a concurrent duplicate gets "in use" rather than waiting.
        Raises :class:`InvalidJSON` for a tool name or arguments the store could
        not keep exactly (see :func:`check_json_value`), and
        :class:`InvalidEdit` for ``editable`` names it refuses (see
        :func:`check_editable`); nothing is written then. ``editable`` is part
        of the body an idempotency key is bound to.
        """
        check_json_value(tool)
        if not isinstance(arguments, dict):
            raise InvalidJSON("the arguments must be a JSON object")
        check_json_value(arguments)
        names = check_editable(arguments, editable)
        digest = body_hash(tool, arguments, timeout_seconds, names)
        with self._lock:
            existing = self.replay(owner, idempotency_key, digest)
            if existing is not None:
                return CreateResult(request=existing, created=False)
            now = self.now()
            request_id = str(uuid.uuid4())
            deadline = now + timedelta(seconds=timeout_seconds)
            with self.transaction() as db:
                db.execute(
                    "INSERT INTO requests (id, owner_id, idempotency_key, body_sha256, tool, "
                    "arguments, timeout, status, created_at, deadline_at, editable) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        request_id,
                        owner.id,
                        idempotency_key,
                        digest,
                        tool,
                        canonical_json(arguments),
                        format_duration(timeout_seconds),
                        PENDING,
                        _to_us(now),
                        _to_us(deadline),
                        canonical_json(list(names)) if names else None,
                    ),
                )
                db.execute(
                    "INSERT INTO idempotency_keys (owner_id, key, body_sha256, request_id, "
                    "created_at) VALUES (?, ?, ?, ?, ?)",
                    (owner.id, idempotency_key, digest, request_id, _to_us(now)),
                )
                detail = {"editable": list(names)} if names else {}
                seq = self._event(db, request_id, "created", now, owner.id, detail)
            request = self._get(request_id)
        assert request is not None
        self._changed(seq, [request_id])
        logger.debug("created request %s (%s)", request_id, tool)
        return CreateResult(request=request, created=True)

    def _get(self, request_id: str, owner_id: str | None = None) -> StoredRequest | None:
        """Read one request, writing its expiry first if its deadline has passed."""
        with self._lock:
            row = (
                self._read()
                .execute("SELECT * FROM requests WHERE id = ?", (request_id,))
                .fetchone()
            )
            if row is None or (owner_id is not None and row["owner_id"] != owner_id):
                return None
            if row["status"] == PENDING and row["deadline_at"] <= _to_us(self.now()):
                self._expire([request_id])
                row = (
                    self._read()
                    .execute("SELECT * FROM requests WHERE id = ?", (request_id,))
                    .fetchone()
                )
            return _request(row)

    def _expire(self, request_ids: list[str]) -> None:
        """Mark these overdue pending requests expired, with an audit event each."""
        if not request_ids:
            return
        seq = 0
        expired: list[str] = []
        with self.transaction() as db:
            for request_id in request_ids:
                row = db.execute(
                    "SELECT deadline_at FROM requests WHERE id = ? AND status = ?",
                    (request_id, PENDING),
                ).fetchone()
                if row is None:
                    continue
                db.execute("UPDATE requests SET status = ? WHERE id = ?", (EXPIRED, request_id))
                # The event is dated at the deadline, when it really expired, even if
                # the server was down then and only notices now.
                deadline = _from_us(row["deadline_at"])
                assert deadline is not None
                seq = self._event(db, request_id, "expired", deadline, None, {})
                expired.append(request_id)
        if expired:
            logger.debug("expired %d request(s)", len(expired))
            self._changed(seq, expired)

    def expire_due(self) -> datetime | None:
        """Expire every overdue pending request; return the next pending deadline, if any."""
        with self._lock:
            now_us = _to_us(self.now())
            due = [
                row[0]
                for row in self._read().execute(
                    "SELECT id FROM requests WHERE status = ? AND deadline_at <= ?",
                    (PENDING, now_us),
                )
            ]
            self._expire(due)
            row = (
                self._read()
                .execute("SELECT MIN(deadline_at) FROM requests WHERE status = ?", (PENDING,))
                .fetchone()
            )
        return _from_us(row[0])

    def get_request(self, request_id: str, *, owner_id: str | None = None) -> StoredRequest | None:
        """The current state of a request (None if unknown, or not ``owner_id``'s)."""
        return self._get(request_id, owner_id)

    def owner_of(self, request_id: str) -> str | None:
        """The id of the credential that created a request, or None if unknown."""
        with self._lock:
            row = (
                self._read()
                .execute("SELECT owner_id FROM requests WHERE id = ?", (request_id,))
                .fetchone()
            )
        return None if row is None else str(row[0])

    def poll(
        self,
        request_id: str,
        *,
        viewer: Credential,
        wait: float = 0.0,
        should_stop: Callable[[], bool] | None = None,
    ) -> StoredRequest | None:
        """Long-poll: the request once it is not pending, or when ``wait`` seconds pass.

        An instance credential sees only its own requests (None otherwise) and
        its polls are counted in the audit trail; a reviewer sees any request.
        The wait ends early, without busy-waiting, when the request is decided
        or cancelled (woken at once) or its deadline passes (timed wait).
        """
        owner_filter = None if viewer.is_reviewer else viewer.id
        request = self._get(request_id, owner_filter)
        if request is None:
            return None
        if not viewer.is_reviewer:
            with self.transaction() as db:
                db.execute(
                    "UPDATE requests SET poll_count = poll_count + 1, last_polled_at = ? "
                    "WHERE id = ?",
                    (_to_us(self.now()), request_id),
                )
        end = time.monotonic() + max(0.0, wait)
        while request.status == PENDING:
            remaining = end - time.monotonic()
            if remaining <= 0 or (should_stop is not None and should_stop()) or self._is_closed():
                break
            event = self._waiters.register(request_id)
            try:
                # Re-read after registering: a decision committed before we
                # registered has already fired, and we must not sleep through it.
                current = self._get(request_id)
                if current is None:
                    break
                request = current
                if request.status != PENDING:
                    break
                # Checked after registering too: a stop that fired every event
                # just before we registered has set its flag already.
                if should_stop is not None and should_stop():
                    break
                to_deadline = (request.deadline_at - self.now()).total_seconds()
                # A millisecond past the deadline, so the next read sees it expired.
                event.wait(min(remaining, max(0.0, to_deadline) + 0.001))
            finally:
                self._waiters.unregister(request_id, event)
            if self._is_closed():
                break
            current = self._get(request_id)
            if current is None:
                break
            request = current
        return request

    @property
    def waiting_polls(self) -> int:
        """How many polls are waiting right now (for tests and metrics)."""
        return self._waiters.count

    def wait_for_waiting_polls(self, n: int, timeout: float) -> bool:
        """Block until at least ``n`` polls are waiting; False on timeout."""
        return self._waiters.wait_for_count(n, timeout)

    def decide(
        self,
        request_id: str,
        *,
        reviewer: Credential,
        status: str,
        note: str | None = None,
        valid_for: float | timedelta = 300,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> StoredRequest | None:
        """Record a reviewer's decision on a pending request; None if unknown.

        ``valid_for`` (seconds or a timedelta) sets ``expires_at = decided_at +
        valid_for`` for an approval; ``expires_at`` overrides it. Neither is
        checked for sign here, so tests can make an approval that has already
        expired; the HTTP layer validates them. Raises :class:`NotPendingError`.

        ``arguments`` (API 1.1) is the whole arguments object with the
        reviewer's edits applied (:func:`with_edits` makes one from JSON
        texts); :func:`check_edit` says what is refused (:class:`InvalidEdit`).
        When it differs from the request's own arguments it is kept exactly,
        echoed as ``decision.arguments`` and recorded in the history with each
        changed name's value before and after; when it equals them it is no edit.
        """
        if status not in (APPROVED, DENIED):
            raise ValueError(f"a decision is 'approved' or 'denied', not {status!r}")
        check_json_value(note)
        if arguments is not None and status != APPROVED:
            raise InvalidEdit("a denial cannot carry 'arguments': only an approval can edit")
        with self._lock:
            current = self._get(request_id)
            if current is None:
                return None
            if current.status != PENDING:
                raise NotPendingError(current)
            edited = check_edit(current, status, arguments)
            now = self.now()
            expires: datetime | None = None
            if status == APPROVED:
                if expires_at is not None:
                    expires = expires_at.astimezone(timezone.utc)
                else:
                    delta = (
                        valid_for
                        if isinstance(valid_for, timedelta)
                        else timedelta(seconds=valid_for)
                    )
                    expires = now + delta
            detail: dict[str, Any] = {"status": status, "note": note}
            if expires is not None:
                detail["expires_at"] = format_timestamp(expires)
            if edited is not None:
                detail["edits"] = {
                    name: {"before": current.arguments[name], "after": edited[name]}
                    for name in changed_names(current.arguments, edited)
                }
            with self.transaction() as db:
                db.execute(
                    "UPDATE requests SET status = ?, decision_status = ?, decision_note = ?, "
                    "decided_at = ?, expires_at = ?, decided_by = ?, decision_arguments = ? "
                    "WHERE id = ? AND status = ?",
                    (
                        status,
                        status,
                        note,
                        _to_us(now),
                        None if expires is None else _to_us(expires),
                        reviewer.id,
                        None if edited is None else canonical_json(edited),
                        request_id,
                        PENDING,
                    ),
                )
                seq = self._event(db, request_id, "decided", now, reviewer.id, detail)
            request = self._get(request_id)
        self._changed(seq, [request_id])
        if edited is None:
            logger.debug("request %s %s by %s", request_id, status, reviewer.name)
        else:
            # Names only: the values are the reviewer's business, and the history has them.
            logger.debug(
                "request %s %s by %s with edits to %s",
                request_id,
                status,
                reviewer.name,
                ", ".join(changed_names(current.arguments, edited)),
            )
        return request

    def cancel(
        self, request_id: str, *, owner: Credential, reason: str | None = None
    ) -> StoredRequest | None:
        """Cancel a pending request of ``owner``'s; None if unknown or not theirs.

        Cancelling a cancelled request returns it unchanged. Raises
        :class:`NotPendingError` if it was approved, denied or expired.
        """
        check_json_value(reason)
        owner_filter = None if owner.is_reviewer else owner.id
        with self._lock:
            current = self._get(request_id, owner_filter)
            if current is None:
                return None
            if current.status == CANCELLED:
                return current
            if current.status != PENDING:
                raise NotPendingError(current)
            now = self.now()
            with self.transaction() as db:
                db.execute(
                    "UPDATE requests SET status = ?, cancelled_at = ?, cancel_reason = ? "
                    "WHERE id = ? AND status = ?",
                    (CANCELLED, _to_us(now), reason, request_id, PENDING),
                )
                seq = self._event(db, request_id, "cancelled", now, owner.id, {"reason": reason})
            request = self._get(request_id)
        self._changed(seq, [request_id])
        logger.debug("request %s cancelled", request_id)
        return request

    def list_requests(
        self,
        *,
        status: str | Collection[str] | None = None,
        owner_id: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[ApprovalRequest]:
        """Requests, newest first, optionally only those with ``status`` or of one owner.

        ``status`` is one status or several; ``limit`` None (the default) means
        all of them, so a caller never misses an old pending request by accident;
        ``before`` is the id of a request, and only requests listed after it
        (older ones) are returned: pass the last id of one page to get the next.
        Raises :class:`UnknownRequest` for a ``before`` that is no request's id.
        Each is a :class:`StoredRequest` (typed as its base: callers keep lists of those).
        """
        statuses = [status] if isinstance(status, str) else list(status or ())
        for one in statuses:
            if one not in STATUSES:
                raise ValueError(f"unknown status {one!r}")
        self.expire_due()
        query = "SELECT * FROM requests"
        clauses: list[str] = []
        params: list[Any] = []
        if statuses:
            clauses.append(f"status IN ({', '.join('?' for _ in statuses)})")
            params.extend(statuses)
        if owner_id is not None:
            clauses.append("owner_id = ?")
            params.append(owner_id)
        with self._lock:
            if before is not None:
                row = (
                    self._read()
                    .execute("SELECT created_at, rowid FROM requests WHERE id = ?", (before,))
                    .fetchone()
                )
                if row is None:
                    raise UnknownRequest(f"no request has the id {before!r}")
                clauses.append("(created_at, rowid) < (?, ?)")
                params.extend((row[0], row[1]))
            if clauses:
                query += " WHERE " + " AND ".join(clauses)
            query += " ORDER BY created_at DESC, rowid DESC"
            if limit is not None:
                query += " LIMIT ?"
                params.append(limit)
            rows = self._read().execute(query, params).fetchall()
        return [_request(row) for row in rows]

    def annotations(self, request_ids: Sequence[str]) -> dict[str, Annotation]:
        """Who decided each of these requests and why it was cancelled, by request id.

        For the review page, which shows both; unknown ids are left out.
        """
        out: dict[str, Annotation] = {}
        ids = list(request_ids)
        with self._lock:
            # Chunks stay below SQLite's limit on bound parameters.
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                rows = self._read().execute(
                    "SELECT r.id, c.name, r.cancel_reason FROM requests r "
                    "LEFT JOIN credentials c ON c.id = r.decided_by "
                    f"WHERE r.id IN ({', '.join('?' for _ in chunk)})",
                    chunk,
                )
                for row in rows:
                    out[row[0]] = Annotation(decided_by=row[1], cancel_reason=row[2])
        return out

    def history(self, request_id: str) -> History | None:
        """The audit trail of a request, or None if unknown."""
        with self._lock:
            request = self._get(request_id)
            if request is None:
                return None
            db = self._read()
            row = db.execute(
                "SELECT owner_id, poll_count, last_polled_at FROM requests WHERE id = ?",
                (request_id,),
            ).fetchone()
            rows = db.execute(
                "SELECT * FROM events WHERE request_id = ? ORDER BY seq", (request_id,)
            ).fetchall()
            actors = {cred.id: cred for cred in self.list_credentials()}
        events = []
        for event in rows:
            at = _from_us(event["at"])
            assert at is not None
            events.append(
                AuditEvent(
                    seq=event["seq"],
                    at=at,
                    type=event["type"],
                    actor=actors.get(event["actor_id"]) if event["actor_id"] else None,
                    # Exactly, as the request: an edit's before and after may be 1e400.
                    detail=load_stored(event["detail"] or "{}"),
                )
            )
        return History(
            request=request,
            owner=actors.get(row["owner_id"]),
            poll_count=int(row["poll_count"]),
            last_polled_at=_from_us(row["last_polled_at"]),
            events=events,
        )

    # ------------------------------------------------------------------ change feed

    @property
    def seq(self) -> int:
        """The change sequence: the number of the last create/decide/cancel/expire event."""
        with self._change:
            return self._seq

    def wait_for_change(
        self, *, after: int, timeout: float, should_stop: Callable[[], bool] | None = None
    ) -> int:
        """Block until the change sequence exceeds ``after``; return it.

        Returns early (with the unchanged sequence) after ``timeout`` seconds,
        when :meth:`wake_all` is called, or when ``should_stop()`` is true
        (checked under the same lock :meth:`wake_all` notifies with, so a stop
        flag set before ``wake_all()`` is never missed).
        """
        with self._change:
            generation = self._wake_generation
            self._change.wait_for(
                lambda: (
                    self._seq > after
                    or self._wake_generation != generation
                    or (should_stop is not None and should_stop())
                ),
                max(0.0, timeout),
            )
            return self._seq


def _credential(row: sqlite3.Row) -> Credential:
    created = _from_us(row["created_at"])
    assert created is not None
    return Credential(
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        created_at=created,
        revoked_at=_from_us(row["revoked_at"]),
    )


def _request(row: sqlite3.Row) -> StoredRequest:
    decision = None
    if row["decision_status"] is not None:
        decided_at = _from_us(row["decided_at"])
        assert decided_at is not None
        edited = row["decision_arguments"]
        decision = Decision(
            status=row["decision_status"],
            note=row["decision_note"],
            decided_at=decided_at,
            expires_at=_from_us(row["expires_at"]),
            arguments=None if edited is None else load_stored(edited),
        )
    created = _from_us(row["created_at"])
    deadline = _from_us(row["deadline_at"])
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
        cancelled_at=_from_us(row["cancelled_at"]),
        editable=() if editable is None else tuple(load_stored(editable)),
    )


__all__ = [
    "CREDENTIAL_KINDS",
    "INSTANCE",
    "KEY_RETENTION",
    "MAX_EDITABLE",
    "MAX_JSON_DEPTH",
    "REDACTED_KEY",
    "REVIEWER",
    "Annotation",
    "AuditEvent",
    "CreateResult",
    "Credential",
    "FirstStartTokens",
    "History",
    "IdempotencyKeyInUse",
    "IdempotencyKeyReused",
    "InvalidEdit",
    "InvalidJSON",
    "JSONNumber",
    "NotPendingError",
    "Session",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoredRequest",
    "UnknownRequest",
    "body_hash",
    "canonical_json",
    "changed_names",
    "check_edit",
    "check_editable",
    "check_given_token",
    "check_json_value",
    "contains_redacted",
    "dump_json",
    "load_json",
    "system_clock",
    "with_edits",
]
