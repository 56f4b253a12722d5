"""Reading many requests at once: the list (filters, paging), annotations, a history."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from approval_guard._codec.exact_json import load_stored
from approval_guard._codec.wire import PENDING, STATUSES
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.provider.store.models import (
    Annotation,
    AuditEvent,
    History,
    StoredRequest,
    UnknownRequest,
)
from approval_guard.provider.store.sql.base import credential_from_row, from_us, request_from_row
from approval_guard.provider.store.sql.requests import RequestsMixin

# Below SQLite's limit on bound parameters.
_CHUNK = 500


class QueriesMixin(RequestsMixin):
    """List requests, annotate them for the review page, read a request's audit trail."""

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
        order = self._ORDER_KEY
        query = "SELECT * FROM requests"
        clauses: list[str] = []
        params: list[Any] = []
        if statuses:
            clauses.append(f"status IN ({', '.join('?' for _ in statuses)})")
            params.extend(statuses)
        if owner_id is not None:
            clauses.append("owner_id = ?")
            params.append(owner_id)
        with self._reading() as db:
            if before is not None:
                row = db.execute(
                    f"SELECT created_at, {order} FROM requests WHERE id = ?", (before,)
                ).fetchone()
                if row is None:
                    raise UnknownRequest(f"no request has the id {before!r}")
                clauses.append(f"(created_at, {order}) < (?, ?)")
                params.extend((row[0], row[1]))
            if clauses:
                query += " WHERE " + " AND ".join(clauses)
            query += f" ORDER BY created_at DESC, {order} DESC"
            if limit is not None:
                query += " LIMIT ?"
                params.append(limit)
            rows = db.execute(query, params).fetchall()
        return [request_from_row(row) for row in rows]

    def annotations(self, request_ids: Sequence[str]) -> dict[str, Annotation]:
        """Who decided each of these requests and why it was cancelled, by request id.

        For the review page, which shows both; unknown ids are left out.
        """
        out: dict[str, Annotation] = {}
        ids = list(request_ids)
        with self._reading() as db:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                rows = db.execute(
                    "SELECT r.id, COALESCE(r.decided_by_name, c.name), r.cancel_reason, "
                    "r.owner_id "
                    "FROM requests r "
                    "LEFT JOIN credentials c ON c.id = r.decided_by "
                    f"WHERE r.id IN ({', '.join('?' for _ in chunk)})",
                    chunk,
                ).fetchall()
                for row in rows:
                    out[row[0]] = Annotation(
                        decided_by=row[1], cancel_reason=row[2], owner_id=row[3]
                    )
        return out

    def pending_in_batch(self, request_id: str, *, limit: int) -> list[StoredRequest]:
        """The pending requests of this request's batch (API 1.3), oldest first, at most ``limit``.

        A batch is one instance credential's: the same ``batch`` text from two
        agents makes two batches. Empty when the request is unknown, has no
        batch, or nothing in it is pending (it included).
        """
        self.expire_due()
        with self._reading() as db:
            row = db.execute(
                "SELECT owner_id, batch FROM requests WHERE id = ?", (request_id,)
            ).fetchone()
            if row is None or row[1] is None:
                return []
            rows = db.execute(
                "SELECT * FROM requests WHERE status = ? AND owner_id = ? AND batch = ? "
                f"ORDER BY created_at, {self._ORDER_KEY} LIMIT ?",
                (PENDING, row[0], row[1], limit),
            ).fetchall()
        return [request_from_row(one) for one in rows]

    def history(self, request_id: str) -> History | None:
        """The audit trail of a request, or None if unknown."""
        request = self._get(request_id)
        if request is None:
            return None
        with self._reading() as db:
            row = db.execute(
                "SELECT owner_id, poll_count, last_polled_at FROM requests WHERE id = ?",
                (request_id,),
            ).fetchone()
            rows = db.execute(
                "SELECT * FROM events WHERE request_id = ? ORDER BY seq", (request_id,)
            ).fetchall()
            actors = {
                cred.id: cred
                for cred in map(
                    credential_from_row,
                    db.execute(
                        "SELECT * FROM credentials WHERE id IN "
                        "(SELECT owner_id FROM requests WHERE id = ? "
                        "UNION SELECT actor_id FROM events WHERE request_id = ?)",
                        (request_id, request_id),
                    ).fetchall(),
                )
            }
        events = []
        for event in rows:
            at = from_us(event["at"])
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
            last_polled_at=from_us(row["last_polled_at"]),
            events=events,
        )
