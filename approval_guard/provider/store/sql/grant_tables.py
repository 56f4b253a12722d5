"""The grants' tables, their states, a grant as asked for and as read, who may act on one.

Shared by the mixin that gives and uses grants (``sql/grants.py``), the one
that lists and ends them (``sql/grant_reviews.py``), the credentials' removal
(which ends a removed person's grants) and both databases' schemas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from approval_guard._codec.exact_json import canonical_json, load_stored
from approval_guard.provider.store.models import Credential, Forbidden, Grant
from approval_guard.provider.store.sql.base import (
    Tx,
    credential_from_row,
    from_us,
    insert_audit,
    returned,
    sha256,
    to_us,
)

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
