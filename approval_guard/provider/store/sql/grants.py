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
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from approval_guard._codec.exact_json import canonical_json, load_stored
from approval_guard._codec.wire import APPROVED, DENIED, PENDING, format_timestamp
from approval_guard.provider.rules.auto import AutoRule
from approval_guard.provider.rules.checks import approval_expiry, same_person
from approval_guard.provider.rules.config import NO_RULES, Rules, ToolRule
from approval_guard.provider.rules.scope import SAME, ScopeError, check_match, covers
from approval_guard.provider.store.models import (
    Credential,
    GrantRefused,
    StoredRequest,
)
from approval_guard.provider.store.sql.base import (
    Reader,
    SQLStoreBase,
    Tx,
    from_us,
    insert_audit,
    returned,
    to_us,
)
from approval_guard.provider.store.sql.grant_tables import (
    GRANT_PENDING,
    LIVE,
    MAX_USES,
    USED_UP,
    GrantSpec,
    shape_of,
)

logger = logging.getLogger("approval_guard.provider")


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
        autos = [one for one in rule.auto if rule_covers(one, request)]
        if autos and not _agent_live(tx, owner):
            autos = []  # removed since its token was read: a rule decides nothing for it
        for auto in autos:
            if auto.decision == DENIED:
                return self._decide_by(tx, request, rule, now, source, auto=auto)
        rows = self._grant_candidates(tx, request, owner.id, now)
        candidates = [row for row in rows if grant_row_covers(row, request)]
        # Standing denials first, then approvals; a use is counted only where it decides.
        for wanted in (DENIED, APPROVED):
            if wanted == APPROVED:
                for auto in autos:
                    return self._decide_by(tx, request, rule, now, source, auto=auto)
            for row in candidates:
                if row["decision"] != wanted:
                    continue
                granters = self._live_granters(tx, row["id"], rule)
                if granters is None or not grant_may_decide(row, granters, request, rule):
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

    def _live_granters(
        self, tx: Reader, grant_id: str, rule: ToolRule
    ) -> list[tuple[str, str]] | None:
        """``[(name, id)]`` of a grant's givers; None if one is gone or no longer allowed."""
        rows = tx.execute(
            "SELECT ga.name, ga.reviewer_id, c.id, c.revoked_at, c.roles "
            "FROM grant_approvals ga LEFT JOIN credentials c ON c.id = ga.reviewer_id "
            "WHERE ga.grant_id = ? ORDER BY ga.n",
            (grant_id,),
        ).fetchall()
        out = []
        for name, reviewer_id, found, revoked_at, roles in rows:
            if found is None or revoked_at is not None:
                return None
            # Roles are read only where the rule names approvers (a reviewer without one is none).
            if rule.approvers is not None and not rule.may_decide(
                tuple(load_stored(roles)) if roles else ()
            ):
                return None
            out.append((str(name), str(reviewer_id)))
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


def _agent_live(tx: Tx, owner: Credential) -> bool:
    """Whether the create's agent credential is live as this transaction sees it.

    Its token was read before the create's transaction; a removal that committed
    since has ended its grants, and must keep a rule from deciding for it too.
    """
    return (
        returned(
            tx.execute("SELECT 1 FROM credentials WHERE id = ? AND revoked_at IS NULL", (owner.id,))
        )
        is not None
    )


def grant_may_decide(
    row: Any, granters: Sequence[tuple[str, str]], request: StoredRequest, rule: ToolRule
) -> bool:
    """Whether the tool's rule, as it is now, lets this grant decide this request.

    The one check of a grant's use, at a create and when applied to a pending
    request alike: an approval needs grants still on for the tool, at least as
    many givers as the request needs approvals, and none of them the person the
    request is for where self-approval is off. A standing denial needs nothing more.
    """
    if row["decision"] != APPROVED:
        return True
    if not rule.grants or len(granters) < request.approvals_required:
        return False
    return (
        rule.self_approval
        or request.requested_by is None
        or not any(same_person(name, request.requested_by) for name, _ in granters)
    )


def rule_covers(auto: AutoRule, request: StoredRequest) -> bool:
    if auto.requested_by is not None:
        asked_for = request.requested_by
        if asked_for is None:
            return False
        if auto.decision == DENIED:
            # A denial's person is matched as self-approval matches one (case, fullwidth
            # forms): "Mallory@Example.com" must not slip past a rule denying mallory's.
            if not any(same_person(name, asked_for) for name in auto.requested_by):
                return False
        elif asked_for not in auto.requested_by:
            return False  # an approval's person exactly as written (stricter)
    return covers(auto.match, request.arguments, granted=None)


def grant_row_covers(row: Any, request: StoredRequest) -> bool:
    if row["requested_by_mode"] == "same":
        asked_for, granted_for = request.requested_by, row["for_requested_by"]
        if row["decision"] == DENIED and asked_for is not None and granted_for is not None:
            # A standing denial's person as self-approval matches one: "Dave" is dave.
            if not same_person(granted_for, asked_for):
                return False
        elif asked_for != granted_for:
            return False  # a grant's person exactly as written (stricter)
    return covers(
        load_stored(row["scope"]), request.arguments, granted=load_stored(row["arguments"])
    )
