"""Standing grants and auto-decisions: given with a decision, used by a create, seen, revoked.

A grant is written in the transaction of the decision that gives it, and used
in the transaction of the create it covers: its use is counted there, so racing
creates (on any instance) use it exactly ``uses`` times, and a revocation or a
reviewer's removal that committed before a create is seen by it. Every check of
who gave it (still live, still allowed by the tool's rule) is made in that same
transaction, never on a credential read before it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from approval_guard._codec.exact_json import canonical_json, load_stored
from approval_guard._codec.wire import APPROVED, DENIED, PENDING, format_timestamp
from approval_guard.provider.rules.checks import approval_expiry, same_person
from approval_guard.provider.rules.config import NO_RULES, AutoRule, Rules, ToolRule
from approval_guard.provider.rules.scope import SAME, ScopeError, check_match, covers
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
    SQLStoreBase,
    Tx,
    credential_from_row,
    from_us,
    insert_audit,
    request_from_row,
    returned,
    sha256,
    to_us,
)

logger = logging.getLogger("approval_guard.provider")

#: The grants' tables, in the shared dialect (PostgreSQL's types are translated).
TABLES = ("grants", "grant_approvals", "grant_shapes")
_COLUMNS = """(
    id                TEXT PRIMARY KEY,
    tool              TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    agent_name        TEXT NOT NULL,
    decision          TEXT NOT NULL,
    status            TEXT NOT NULL,
    scope             TEXT NOT NULL,
    arguments         TEXT NOT NULL,
    requested_by_mode TEXT NOT NULL,
    for_requested_by  TEXT,
    granted_at        BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL,
    uses              BIGINT,
    uses_left         BIGINT,
    used              BIGINT NOT NULL DEFAULT 0,
    from_request      TEXT NOT NULL,
    approvals_required INTEGER NOT NULL,
    note              TEXT,
    ended_at          BIGINT,
    ended_by          TEXT,
    end_note          TEXT,
    shape             TEXT NOT NULL
)"""
#: The statements that make them (both databases; the names get ``ag_`` on PostgreSQL).
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS grants {_COLUMNS}",
    # A create looks up only the live grants of its tool and agent whose "same"
    # arguments hold its own values (never a scan of every grant on the tool).
    "CREATE INDEX IF NOT EXISTS grants_by_shape ON grants (tool, agent_id, shape, status)",
    # Which sets of "same" argument names the grants of a tool and agent use.
    """CREATE TABLE IF NOT EXISTS grant_shapes (
    tool     TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    names    TEXT NOT NULL,
    PRIMARY KEY (tool, agent_id, names)
)""",
    """CREATE TABLE IF NOT EXISTS grant_approvals (
    grant_id    TEXT NOT NULL,
    reviewer_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    at          BIGINT NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (grant_id, reviewer_id)
)""",
    "CREATE INDEX IF NOT EXISTS grant_approvals_by_reviewer ON grant_approvals (reviewer_id)",
)

#: Stored grant states; ``expired`` is worked out from ``expires_at`` when read.
LIVE = "live"
GRANT_PENDING = "pending"
REVOKED = "revoked"
USED_UP = "used_up"
ENDED = "ended"
EXPIRED = "expired"
#: The most uses a grant may count.
MAX_USES = 1_000_000


@attrs.frozen
class GrantSpec:
    """A grant as a decision asks for it (checked for shape by the HTTP layer)."""

    for_seconds: int
    uses: int | None = None
    match: dict[str, Any] = attrs.field(factory=dict)
    requested_by: str = "same"


def shape_of(arguments: Mapping[str, Any], same: Sequence[str]) -> str:
    """The digest a grant is found by: every argument name, and the values of its "same" ones.

    A create computes it from its own arguments for each set of "same" names
    its tool's and agent's grants use, so the database finds exactly the grants
    whose "same" values are this call's (the rest of the scope is checked after).
    """
    key = {"names": sorted(arguments), "same": {name: arguments[name] for name in sorted(same)}}
    return sha256(canonical_json(key))


def grant_from_row(row: Any, granters: Sequence[str], now: datetime) -> Grant:
    """A ``grants`` row as a :class:`Grant`, its status as of ``now``."""
    granted_at = from_us(row["granted_at"])
    expires_at = from_us(row["expires_at"])
    assert granted_at is not None and expires_at is not None
    status = row["status"]
    if status in (LIVE, GRANT_PENDING) and expires_at <= now:
        status = EXPIRED
    return Grant(
        id=row["id"],
        tool=row["tool"],
        decision=row["decision"],
        status=status,
        match=load_stored(row["scope"]),
        arguments=load_stored(row["arguments"]),
        requested_by=row["requested_by_mode"],
        for_requested_by=row["for_requested_by"],
        agent=row["agent_name"],
        agent_id=row["agent_id"],
        granted_by=tuple(granters),
        granted_at=granted_at,
        expires_at=expires_at,
        uses=row["uses"],
        uses_left=row["uses_left"],
        from_request=row["from_request"],
        approvals_required=row["approvals_required"],
        note=row["note"],
    )


def live_reviewer(tx: Tx, reviewer: Credential) -> Credential:
    """The reviewer's credential as this transaction sees it; :class:`Forbidden` if removed.

    Read inside the transaction that records what they do, so a removal that
    committed first is always seen (their roles too, as they are now).
    """
    row = returned(tx.execute("SELECT * FROM credentials WHERE id = ?", (reviewer.id,)))
    if row is None or row["revoked_at"] is not None or row["kind"] != "reviewer":
        raise Forbidden(f"{reviewer.name} is no longer a reviewer here")
    return credential_from_row(row)


class GrantsMixin(SQLStoreBase):
    """Give, use, list, approve and revoke standing grants; apply rules-file auto-decisions."""

    # ------------------------------------------------------------------ giving

    def _give_grant(
        self,
        tx: Tx,
        current: StoredRequest,
        owner_id: str,
        reviewer: Credential,
        status: str,
        note: str | None,
        spec: GrantSpec,
        rule: ToolRule,
        now: datetime,
        source: str,
    ) -> str:
        """Inside a decision's transaction: the grant it gives; :class:`GrantRefused` if none."""
        if not rule.grants:
            raise GrantRefused(
                f"standing grants are turned off for {current.tool} (grants = false)"
            )
        if not 0 < spec.for_seconds <= rule.max_grant:
            raise GrantRefused(
                f"a grant on {current.tool} may last at most {rule.max_grant} seconds (max_grant)"
            )
        if spec.uses is not None and not 1 <= spec.uses <= MAX_USES:
            raise GrantRefused(f"a grant's uses must be 1 to {MAX_USES}, or null")
        if spec.requested_by not in ("same", "any"):
            raise GrantRefused("a grant's requested_by is 'same' or 'any'")
        try:
            match = check_match(spec.match, arguments=current.arguments, allow_same=True)
        except ScopeError as exc:
            raise GrantRefused(f"a grant's match: {exc}") from None
        agent = returned(tx.execute("SELECT name FROM credentials WHERE id = ?", (owner_id,)))
        same = sorted(name for name, constraint in match.items() if constraint == SAME)
        tx.execute(
            "INSERT INTO grant_shapes (tool, agent_id, names) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (current.tool, owner_id, canonical_json(same)),
        )
        grant_id = "grant_" + secrets.token_hex(8)
        required = 1 if status == DENIED else current.approvals_required
        tx.execute(
            "INSERT INTO grants (id, tool, agent_id, agent_name, decision, status, scope, "
            "arguments, requested_by_mode, for_requested_by, granted_at, expires_at, uses, "
            "uses_left, used, from_request, approvals_required, note, shape) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
            (
                grant_id,
                current.tool,
                owner_id,
                "?" if agent is None else str(agent[0]),
                status,
                LIVE if required <= 1 else GRANT_PENDING,
                canonical_json(match),
                canonical_json(current.arguments),
                spec.requested_by,
                current.requested_by,
                to_us(now),
                to_us(now + timedelta(seconds=spec.for_seconds)),
                spec.uses,
                spec.uses,
                current.id,
                required,
                note,
                shape_of(current.arguments, same),
            ),
        )
        tx.execute(
            "INSERT INTO grant_approvals (grant_id, reviewer_id, name, at, n) "
            "VALUES (?, ?, ?, ?, 1)",
            (grant_id, reviewer.id, reviewer.name, to_us(now)),
        )
        insert_audit(
            tx,
            at=now,
            actor=reviewer.name,
            source=source,
            action="grant.given",
            request_id=current.id,
            detail={
                "grant": grant_id,
                "decision": status,
                "tool": current.tool,
                "match": match,
                "requested_by": spec.requested_by,
                "for_seconds": spec.for_seconds,
                "uses": spec.uses,
                "approvals": f"1 of {required}",
            },
        )
        logger.info("grant %s on %s given by %s", grant_id, current.tool, reviewer.name)
        return grant_id

    # ------------------------------------------------------------------ using

    def _decide_at_create(
        self, tx: Tx, request: StoredRequest, owner: Credential, rules: Rules | None, source: str
    ) -> Any:
        """Inside a create's transaction: decide it now if a rule or a live grant covers it.

        The updated row, or None when nothing covers it (a person decides).
        Deny rules, then standing denials, then approve rules, then grants: any
        denial wins over any approval.
        """
        rule = (rules or NO_RULES).for_tool(request.tool)
        now = self.now()
        autos = [one for one in rule.auto if _rule_covers(one, request)]
        for auto in autos:
            if auto.decision == DENIED:
                return self._decide_by(tx, request, rule, now, source, auto=auto)
        rows = self._grant_candidates(tx, request, owner.id, now)
        candidates = [row for row in rows if _grant_row_covers(row, request)]
        # Standing denials first, then approvals; a use is counted only where it decides.
        for wanted in (DENIED, APPROVED):
            if wanted == APPROVED:
                for auto in autos:
                    return self._decide_by(tx, request, rule, now, source, auto=auto)
            for row in candidates:
                if row["decision"] != wanted:
                    continue
                granters = self._live_granters(tx, row["id"], rule)
                if granters is None:
                    continue
                if (
                    wanted == APPROVED
                    and not rule.self_approval
                    and request.requested_by is not None
                    and any(same_person(name, request.requested_by) for name, _ in granters)
                ):
                    continue  # a grant never approves a request made for one of its granters
                if wanted == APPROVED and not rule.grants:
                    continue
                used = returned(
                    tx.execute(
                        "UPDATE grants SET used = used + 1, "
                        "uses_left = CASE WHEN uses_left IS NULL THEN NULL "
                        "ELSE uses_left - 1 END, "
                        "status = CASE WHEN uses_left = 1 THEN ? ELSE status END "
                        "WHERE id = ? AND status = ? AND expires_at > ? "
                        "AND (uses_left IS NULL OR uses_left > 0) RETURNING *",
                        (USED_UP, row["id"], LIVE, to_us(now)),
                    )
                )
                if used is None:
                    continue
                return self._decide_by(tx, request, rule, now, source, grant=(used, granters))
        return None

    @staticmethod
    def _grant_candidates(
        tx: Tx, request: StoredRequest, agent_id: str, now: datetime
    ) -> list[Any]:
        """The live grants of this tool and agent whose "same" values are this request's."""
        shapes = []
        for row in tx.execute(
            "SELECT names FROM grant_shapes WHERE tool = ? AND agent_id = ?",
            (request.tool, agent_id),
        ).fetchall():
            names = load_stored(row[0])
            if all(name in request.arguments for name in names):
                shapes.append(shape_of(request.arguments, names))
        if not shapes:
            return []
        marks = ", ".join("?" for _ in shapes)
        return list(
            tx.execute(
                f"SELECT * FROM grants WHERE tool = ? AND agent_id = ? AND shape IN ({marks}) "
                "AND status = ? AND expires_at > ? ORDER BY granted_at",
                (request.tool, agent_id, *shapes, LIVE, to_us(now)),
            ).fetchall()
        )

    def _live_granters(self, tx: Tx, grant_id: str, rule: ToolRule) -> list[tuple[str, str]] | None:
        """``[(name, id)]`` of a grant's givers; None if one is gone or no longer allowed."""
        rows = tx.execute(
            "SELECT ga.name AS granter, ga.reviewer_id AS granter_id, c.* "
            "FROM grant_approvals ga LEFT JOIN credentials c ON c.id = ga.reviewer_id "
            "WHERE ga.grant_id = ? ORDER BY ga.n",
            (grant_id,),
        ).fetchall()
        out = []
        for row in rows:
            if row["id"] is None or row["revoked_at"] is not None:
                return None
            if not rule.may_decide(credential_from_row(row).roles):
                return None
            out.append((str(row["granter"]), str(row["granter_id"])))
        return out or None

    def _decide_by(
        self,
        tx: Tx,
        request: StoredRequest,
        rule: ToolRule,
        now: datetime,
        source: str,
        *,
        auto: AutoRule | None = None,
        grant: tuple[Any, list[tuple[str, str]]] | None = None,
    ) -> Any:
        """Record the decision a rule or a grant made on a just-created (or pending) request."""
        if auto is not None:
            status, note, names, decider_id = auto.decision, None, f"rule:{auto.name}", None
            summary = None
            detail: dict[str, Any] = {"rule": auto.name}
        else:
            assert grant is not None
            row, givers = grant
            granters = [name for name, _ in givers]
            status, note = row["decision"], row["note"]
            names = ", ".join(granters)
            decider_id = givers[0][1]
            granted_at = from_us(row["granted_at"])
            expires_at = from_us(row["expires_at"])
            assert granted_at is not None and expires_at is not None
            summary = {
                "id": row["id"],
                "granted_by": granters,
                "granted_at": format_timestamp(granted_at),
                "expires_at": format_timestamp(expires_at),
                "uses_left": row["uses_left"],
            }
            detail = {"grant": row["id"], "granted_by": granters, "uses_left": row["uses_left"]}
        expires = (
            approval_expiry(request.tool, rule, now, None, None) if status == APPROVED else None
        )
        updated = returned(
            tx.execute(
                "UPDATE requests SET status = ?, decision_status = ?, decision_note = ?, "
                "decided_at = ?, expires_at = ?, decided_by = ?, decided_by_name = ?, "
                "decision_grant = ? WHERE id = ? AND status = ? RETURNING *",
                (
                    status,
                    status,
                    note,
                    to_us(now),
                    None if expires is None else to_us(expires),
                    decider_id,
                    names,
                    None if summary is None else canonical_json(summary),
                    request.id,
                    PENDING,
                ),
            )
        )
        if updated is None:  # pragma: no cover - the create's own row, or one locked pending
            return None
        event = {"status": status, "note": note, "decided_by": names, **detail}
        if expires is not None:
            event["expires_at"] = format_timestamp(expires)
        tx.event(request.id, "decided", now, decider_id, event)
        insert_audit(
            tx,
            at=now,
            actor=names,
            source=source,
            action="request.approval" if status == APPROVED else "request.denial",
            request_id=request.id,
            detail={**event, "channel": "grant" if grant is not None else "rule"},
        )
        if grant is not None:
            insert_audit(
                tx,
                at=now,
                actor=names,
                source=source,
                action="grant.used",
                request_id=request.id,
                detail=detail,
            )
        logger.debug("request %s %s by %s", request.id, status, names)
        return updated

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
        return [
            row["id"]
            for row in rows
            if row["id"] != grant.from_request
            and _grant_row_covers(grant_row, request_from_row(row))
        ]

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
                or not _grant_row_covers(grant_row, current)
                or (
                    grant_row["decision"] == APPROVED
                    and not rule.self_approval
                    and current.requested_by is not None
                    and any(same_person(n, current.requested_by) for n, _ in granters)
                )
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


def end_grants_of(tx: Tx, credential_id: str, name: str, now: datetime) -> int:
    """Inside a removal's transaction: every grant this credential gave, approved or holds ends.

    A reviewer's (given or approved) and an agent's (its calls) alike; returns how many.
    """
    ended = int(
        tx.execute(
            "UPDATE grants SET status = ?, ended_at = ?, ended_by = ?, end_note = ? "
            "WHERE status IN (?, ?) AND (agent_id = ? OR id IN "
            "(SELECT grant_id FROM grant_approvals WHERE reviewer_id = ?))",
            (
                ENDED,
                to_us(now),
                "system",
                f"{name} was removed",
                LIVE,
                GRANT_PENDING,
                credential_id,
                credential_id,
            ),
        ).rowcount
    )
    if ended:
        insert_audit(
            tx,
            at=now,
            actor="system",
            source="system",
            action="grant.ended",
            request_id=None,
            detail={"reason": f"{name} was removed", "grants": ended},
        )
    return ended


def _rule_covers(auto: AutoRule, request: StoredRequest) -> bool:
    if auto.requested_by is not None and request.requested_by not in auto.requested_by:
        return False
    return covers(auto.match, request.arguments, granted=None)


def _grant_row_covers(row: Any, request: StoredRequest) -> bool:
    if row["requested_by_mode"] == "same" and request.requested_by != row["for_requested_by"]:
        return False
    return covers(
        load_stored(row["scope"]), request.arguments, granted=load_stored(row["arguments"])
    )
