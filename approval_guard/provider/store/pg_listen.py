"""Hearing other instances' changes: ``NOTIFY`` payloads and the thread that ``LISTEN``\\s.

Every PostgreSQL store sends, inside each transaction that changes requests,
``pg_notify(channel, "<instance> <seq> <id>,<id>,...")`` (delivered at commit,
in commit order). Payloads stay under PostgreSQL's 8000-byte limit: a long
list of ids goes out in several notifications with the same ``seq``. Each store
listens on its own connection and tells its change feed what *other*
instances did (its own changes it told the feed itself, right after commit).
A listener that lost its connection reconnects and tells the feed "anything may
have changed" (no ids), since notifications sent meanwhile are lost.

Hearing that a request a poll here waits on has changed, the listener (already
awake, off the event loop) reads it at once and hands a settled state to that
poll with the wake-up, so the poll answers without a read of its own, which
would cost a hop to a worker thread and back (:func:`settled_states`). A poll
given nothing (the request still pending, no idle connection, a failed read,
a reconnect) reads it itself, as before.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from approval_guard._codec.wire import PENDING
from approval_guard.provider.store.feed import ChangeFeed, Expected
from approval_guard.provider.store.sql.base import request_from_row

logger = logging.getLogger("approval_guard.provider")

#: Bytes a payload may use, well below PostgreSQL's 8000.
MAX_PAYLOAD = 7000
# How long the thread waits for notifications before it checks whether to stop.
_TICK = 0.25
_RECONNECT_PAUSE = 1.0


def payloads(instance: str, seq: int, request_ids: tuple[str, ...]) -> list[str]:
    """The notifications that tell of one commit, each at most :data:`MAX_PAYLOAD` bytes."""
    head = f"{instance} {seq} "
    out: list[str] = []
    chunk: list[str] = []
    size = len(head.encode("utf-8"))
    for request_id in request_ids:
        length = len(request_id.encode("utf-8")) + 1
        if chunk and size + length > MAX_PAYLOAD:
            out.append(head + ",".join(chunk))
            chunk, size = [], len(head.encode("utf-8"))
        chunk.append(request_id)
        size += length
    out.append(head + ",".join(chunk))
    return out


def parse(payload: str) -> tuple[str, int, tuple[str, ...]] | None:
    """``(instance, seq, request ids)`` of a payload, or None if it is not one of ours."""
    parts = payload.split(" ")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    ids = tuple(one for one in parts[2].split(",") if one)
    return parts[0], int(parts[1]), ids


def settled_states(select: Callable[[str], Any], expected: list[Expected]) -> dict[Expected, Any]:
    """The requests of ``expected`` that are no longer pending, as each viewer may see them.

    ``select`` reads a ``requests`` row (None if there is none). A row owned by
    another credential is not given to an instance's poll (it would be a 404).
    """
    rows: dict[str, Any] = {}
    out: dict[Expected, Any] = {}
    for request_id, owner in expected:
        if request_id not in rows:
            rows[request_id] = select(request_id)
        row = rows[request_id]
        if row is None or row["status"] == PENDING:
            continue
        if owner is None or row["owner_id"] == owner:
            out[(request_id, owner)] = request_from_row(row)
    return out


class Listener:
    """A thread on its own connection that passes other instances' changes to a feed."""

    def __init__(
        self,
        *,
        connect: Callable[[], Any],
        channel: str,
        instance: str,
        feed: ChangeFeed,
        read_seq: Callable[[], int],
        read_ahead: Callable[[list[Expected]], Mapping[Expected, Any]] | None = None,
    ) -> None:
        self._connect = connect
        self._channel = channel
        self._instance = instance
        self._feed = feed
        self._read_seq = read_seq
        self._read_ahead = read_ahead
        self._stop = threading.Event()
        # Listening before the store is handed out, so no change after that is missed.
        self._conn: Any = self._open()
        self._thread = threading.Thread(
            target=self._run, name="approval-guard-pg-listen", daemon=True
        )
        self._thread.start()

    def _open(self) -> Any:
        from psycopg import sql

        conn = self._connect()
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        return conn

    def _run(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                for note in self._conn.notifies(timeout=_TICK):
                    self._heard(note.payload)
                    if self._stop.is_set():
                        break
            except psycopg.Error:
                if self._stop.is_set():
                    return
                logger.warning("lost the PostgreSQL change notifications; reconnecting")
                self._reconnect()

    def _reconnect(self) -> None:
        import psycopg

        with contextlib.suppress(psycopg.Error):
            self._conn.close()
        while not self._stop.wait(_RECONNECT_PAUSE):
            try:
                self._conn = self._open()
                seq = self._read_seq()
            except psycopg.Error:
                continue
            # Whatever was sent while we were away is lost: everyone re-reads.
            self._feed.changed(seq, ())
            return

    def _heard(self, payload: str) -> None:
        parsed = parse(payload)
        if parsed is None:
            logger.warning("ignored a change notification that is not the store's")
            return
        instance, seq, request_ids = parsed
        if instance == self._instance:
            return
        settled: Mapping[Expected, Any] | None = None
        if request_ids and self._read_ahead is not None:
            expected = self._feed.expected(request_ids)
            if expected:
                try:
                    settled = self._read_ahead(expected)
                except Exception:  # the polls read it themselves
                    logger.debug("reading ahead for waiting polls failed", exc_info=True)
        self._feed.changed(seq, request_ids, settled)

    def close(self) -> None:
        """Stop the thread and close its connection."""
        self._stop.set()
        self._thread.join(timeout=5 * _TICK + 1)
        try:
            self._conn.close()
        except Exception:  # pragma: no cover - closing a broken connection
            logger.debug("closing the listening connection failed", exc_info=True)
