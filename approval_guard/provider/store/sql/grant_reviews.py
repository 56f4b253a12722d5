"""Seeing and ending standing grants: list, show, revoke, approve a pending one, apply one.

Every change here, like a grant's giving and use (``sql/grants.py``), checks
the reviewer's credential and roles inside the transaction that records it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from approval_guard._codec.wire import PENDING
from approval_guard.provider.rules.checks import same_person
from approval_guard.provider.rules.config import NO_RULES, Rules
from approval_guard.provider.store.models import (
    Credential,
    Forbidden,
    Grant,
    GrantAlreadyApproved,
    GrantRefused,
    NotPendingError,
    StoredRequest,
    UnknownGrant,
)
from approval_guard.provider.store.sql.base import (
    from_us,
    insert_audit,
    request_from_row,
    returned,
    to_us,
)
from approval_guard.provider.store.sql.grant_tables import (
    GRANT_PENDING,
    LIVE,
    REVOKED,
    USED_UP,
    grant_from_row,
    live_reviewer,
)
from approval_guard.provider.store.sql.grants import (
    GrantsMixin,
    grant_may_decide,
    grant_row_covers,
)


class GrantReviewsMixin(GrantsMixin):
    """List, show, revoke, approve and apply standing grants."""

    # ------------------------------------------------------------------ seeing

    def _grants_where(self, db: Any, where: str, params: Sequence[Any]) -> list[Grant]:
        now = self.now()
        rows = db.execute(f"SELECT * FROM grants WHERE {where}", tuple(params)).fetchall()
        if not rows:
            return []
        names: dict[str, list[str]] = {row["id"]: [] for row in rows}
        marks = ", ".join("?" for _ in names)
        for one in db.execute(
            f"SELECT grant_id, name FROM grant_approvals WHERE grant_id IN ({marks}) "
            "ORDER BY grant_id, n",
            tuple(names),
        ).fetchall():
            names[one["grant_id"]].append(one["name"])
        return [grant_from_row(row, names[row["id"]], now) for row in rows]

    def list_grants(self, *, include_ended: bool = False) -> list[Grant]:
        """Live and pending grants, newest first (``include_ended``: every grant)."""
        with self._reading() as db:
            if include_ended:
                found = self._grants_where(db, "1 = 1 ORDER BY granted_at DESC", ())
            else:
                found = self._grants_where(
                    db,
                    "status IN (?, ?) AND expires_at > ? ORDER BY granted_at DESC",
                    (LIVE, GRANT_PENDING, to_us(self.now())),
                )
        return [one for one in found if include_ended or one.status in (LIVE, GRANT_PENDING)]

    def get_grant(self, grant_id: str) -> Grant | None:
        """One grant by id, or None."""
        with self._reading() as db:
            found = self._grants_where(db, "id = ?", (grant_id,))
        return found[0] if found else None

    # ------------------------------------------------------------------ revoking, approving

    def revoke_grant(
        self,
        grant_id: str,
        *,
        reviewer: Credential,
        note: str | None = None,
        rules: Rules | None = None,
        source: str = "api",
    ) -> Grant:
        """Revoke a pending or live grant; every create after this returns sees it revoked.

        Any reviewer the tool's rule lets decide may revoke (:class:`Forbidden`
        otherwise). Revoking a revoked grant returns it unchanged; one that has
        ended otherwise (expired, used up, its giver removed) is returned as it is.
        """
        now = self.now()
        with self._writing() as tx:
            row = returned(tx.execute("SELECT * FROM grants WHERE id = ?", (grant_id,)))
            if row is None:
                raise UnknownGrant(grant_id)
            live = live_reviewer(tx, reviewer)
            rule = (rules or NO_RULES).for_tool(row["tool"])
            if not rule.may_decide(live.roles):
                raise Forbidden(f"{live.name} may not decide {row['tool']}, nor revoke its grants")
            if row["status"] in (LIVE, GRANT_PENDING):
                tx.execute(
                    "UPDATE grants SET status = ?, ended_at = ?, ended_by = ?, end_note = ? "
                    "WHERE id = ?",
                    (REVOKED, to_us(now), live.name, note, grant_id),
                )
                insert_audit(
                    tx,
                    at=now,
                    actor=live.name,
                    source=source,
                    action="grant.revoked",
                    request_id=row["from_request"],
                    detail={"grant": grant_id, "note": note},
                )
        found = self.get_grant(grant_id)
        assert found is not None
        return found

    def approve_grant(
        self,
        grant_id: str,
        *,
        reviewer: Credential,
        rules: Rules | None = None,
        source: str = "api",
    ) -> Grant:
        """Count one more distinct allowed reviewer's approval of a pending grant.

        It becomes live once its tool's ``approvals_required`` have approved it.
        :class:`Forbidden` for a reviewer the rule does not allow (or the person
        its request was made for, where self-approval is off), :class:`AlreadyApproved`
        for a second approval by one person, :class:`GrantRefused` if it is not pending.
        """
        now = self.now()
        with self._writing() as tx:
            row = returned(tx.execute("SELECT * FROM grants WHERE id = ?", (grant_id,)))
            if row is None:
                raise UnknownGrant(grant_id)
            live = live_reviewer(tx, reviewer)
            rule = (rules or NO_RULES).for_tool(row["tool"])
            if not rule.may_decide(live.roles):
                raise Forbidden(f"{live.name} may not decide {row['tool']}, nor approve its grants")
            expires_at = from_us(row["expires_at"])
            assert expires_at is not None
            if row["status"] != GRANT_PENDING or expires_at <= now:
                raise GrantRefused(f"grant {grant_id} is not pending")
            if (
                not rule.self_approval
                and row["for_requested_by"] is not None
                and same_person(live.name, row["for_requested_by"])
            ):
                raise Forbidden(
                    f"{live.name} asked for the request this grant came from and may not "
                    "approve it themselves"
                )
            if returned(
                tx.execute(
                    "SELECT 1 FROM grant_approvals WHERE grant_id = ? AND "
                    "(reviewer_id = ? OR name = ?)",
                    (grant_id, live.id, live.name),
                )
            ):
                raise GrantAlreadyApproved(f"{live.name} has already approved this grant")
            tx.execute(
                "INSERT INTO grant_approvals (grant_id, reviewer_id, name, at, n) "
                "SELECT ?, ?, ?, ?, COALESCE(MAX(n), 0) + 1 "
                "FROM grant_approvals WHERE grant_id = ?",
                (grant_id, live.id, live.name, to_us(now), grant_id),
            )
            granters = self._live_granters(tx, grant_id, rule) or []
            count = len(granters)
            if count >= row["approvals_required"]:
                tx.execute("UPDATE grants SET status = ? WHERE id = ?", (LIVE, grant_id))
            insert_audit(
                tx,
                at=now,
                actor=live.name,
                source=source,
                action="grant.approval",
                request_id=row["from_request"],
                detail={"grant": grant_id, "approvals": f"{count} of {row['approvals_required']}"},
            )
        found = self.get_grant(grant_id)
        assert found is not None
        return found

    # ------------------------------------------------------------------ pending requests

    def pending_covered(self, grant_id: str, *, rules: Rules | None = None) -> list[str]:
        """The ids of pending requests this live grant would decide now (oldest first)."""
        grant = self.get_grant(grant_id)
        if grant is None:
            raise UnknownGrant(grant_id)
        if grant.status != LIVE:
            return []
        with self._reading() as db:
            rows = db.execute(
                f"SELECT * FROM requests WHERE status = ? AND tool = ? AND owner_id = ? "
                f"AND deadline_at > ? ORDER BY created_at, {self._ORDER_KEY}",
                (PENDING, grant.tool, grant.agent_id, to_us(self.now())),
            ).fetchall()
            grant_row = db.execute("SELECT * FROM grants WHERE id = ?", (grant_id,)).fetchone()
            rule = (rules or NO_RULES).for_tool(grant.tool)
            granters = self._live_granters(db, grant_id, rule)
        if granters is None:
            return []
        # Exactly what apply would decide: covered, and the rule lets the grant decide it.
        out = []
        for row in rows:
            current = request_from_row(row)
            if (
                row["id"] != grant.from_request
                and grant_row_covers(grant_row, current)
                and grant_may_decide(grant_row, granters, current, rule)
            ):
                out.append(row["id"])
        return out

    def apply_grant(
        self,
        grant_id: str,
        request_id: str,
        *,
        reviewer: Credential,
        rules: Rules | None = None,
        source: str = "api",
    ) -> StoredRequest:
        """Decide one pending request with a live grant its giver chose to apply to it.

        Only one of the grant's givers may; the request must be pending and
        covered, and the grant's uses are counted as for a create.
        """
        with self._writing() as tx:
            tx.lock("request:" + request_id)
            live = live_reviewer(tx, reviewer)
            grant_row = returned(tx.execute("SELECT * FROM grants WHERE id = ?", (grant_id,)))
            if grant_row is None:
                raise UnknownGrant(grant_id)
            row = returned(tx.execute("SELECT * FROM requests WHERE id = ?", (request_id,)))
            if row is None:
                raise GrantRefused(f"no request {request_id}")
            current = request_from_row(row)
            if current.status != PENDING or current.deadline_at <= self.now():
                raise NotPendingError(current)
            rule = (rules or NO_RULES).for_tool(current.tool)
            granters = self._live_granters(tx, grant_id, rule)
            if granters is None or live.id not in {gid for _, gid in granters}:
                raise Forbidden("only a live giver of this grant may apply it to pending requests")
            if (
                row["owner_id"] != grant_row["agent_id"]
                or current.tool != grant_row["tool"]
                or not grant_row_covers(grant_row, current)
                or not grant_may_decide(grant_row, granters, current, rule)
            ):
                raise GrantRefused(f"grant {grant_id} does not cover request {request_id}")
            now = self.now()
            used = returned(
                tx.execute(
                    "UPDATE grants SET used = used + 1, "
                    "uses_left = CASE WHEN uses_left IS NULL THEN NULL ELSE uses_left - 1 END, "
                    "status = CASE WHEN uses_left = 1 THEN ? ELSE status END "
                    "WHERE id = ? AND status = ? AND expires_at > ? "
                    "AND (uses_left IS NULL OR uses_left > 0) RETURNING *",
                    (USED_UP, grant_id, LIVE, to_us(now)),
                )
            )
            if used is None:
                raise GrantRefused(f"grant {grant_id} is not live (expired, used up or revoked)")
            updated = self._decide_by(tx, current, rule, now, source, grant=(used, granters))
        return request_from_row(updated)
