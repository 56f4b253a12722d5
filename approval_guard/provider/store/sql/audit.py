"""The audit trail: append-only rows of who did what, when and from where, and reading them back.

Rows are written in the transaction of the change they describe (a create, an
approval, a denial, an edit, a cancel, an expiry, a reviewer added or
removed), so a change and its row commit together or not at all. Other parts
(the webhooks) append theirs with :meth:`AuditMixin.record_audit`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from approval_guard._codec.exact_json import check_json_value, load_stored
from approval_guard.provider.store.models import AuditRow
from approval_guard.provider.store.sql.base import SQLStoreBase, from_us, insert_audit, to_us

#: ``actor`` and ``source`` of what the provider does by itself (an expiry).
SYSTEM = "system"


class AuditMixin(SQLStoreBase):
    """Append audit rows and read them, oldest first."""

    def record_audit(
        self,
        action: str,
        actor: str,
        source: str,
        request_id: str | None,
        detail: dict[str, Any],
    ) -> None:
        """Append one row, e.g. ``("webhook.delivered", "system", "system", id, {...})``.

        ``detail`` must be JSON and must not hold a secret (a webhook's secret,
        a token): audit rows are shown to every reviewer.
        """
        check_json_value(detail)
        with self._writing() as tx:
            insert_audit(
                tx,
                at=self.now(),
                actor=actor,
                source=source,
                action=action,
                request_id=request_id,
                detail=detail,
            )

    def audit(self, since: datetime | None = None, request_id: str | None = None) -> list[AuditRow]:
        """The audit rows, oldest first: only those at or after ``since``, of ``request_id``."""
        clauses: list[str] = []
        params: list[Any] = []
        if since is not None:
            clauses.append("at >= ?")
            params.append(to_us(since))
        if request_id is not None:
            clauses.append("request_id = ?")
            params.append(request_id)
        query = "SELECT * FROM audit"
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        with self._reading() as db:
            rows = db.execute(query + " ORDER BY seq", params).fetchall()
        out = []
        for row in rows:
            at = from_us(row["at"])
            assert at is not None
            out.append(
                AuditRow(
                    seq=int(row["seq"]),
                    at=at,
                    actor=row["actor"],
                    source=row["source"],
                    action=row["action"],
                    request_id=row["request_id"],
                    detail=load_stored(row["detail"]),
                )
            )
        return out
