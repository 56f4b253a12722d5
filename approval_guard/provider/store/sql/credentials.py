"""Credentials and review-page sessions: who may call the provider, kept only as hashes."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from approval_guard._codec.exact_json import canonical_json
from approval_guard._codec.wire import PENDING
from approval_guard.exceptions import ProviderError
from approval_guard.provider.store.checks import check_given_token
from approval_guard.provider.store.models import (
    CREDENTIAL_KINDS,
    INSTANCE,
    REVIEWER,
    SESSION_LIFETIME,
    Approval,
    Credential,
    FirstStartTokens,
    Session,
)
from approval_guard.provider.store.sql.base import (
    SQLStoreBase,
    Tx,
    approvals_text,
    credential_from_row,
    from_us,
    insert_audit,
    returned,
    sha256,
    to_us,
)
from approval_guard.provider.store.sql.grant_tables import end_grants_of

logger = logging.getLogger("approval_guard.provider")

_TOKEN_PREFIX = {INSTANCE: "agi_", REVIEWER: "agr_"}
#: What a named credential of each kind is called (its audit actions, its lock).
_WHO = {INSTANCE: "agent", REVIEWER: "reviewer"}
#: A named reviewer's name: 1 to this many printable characters.
MAX_REVIEWER_NAME = 64
#: A role: 1 to this many printable characters without spaces.
MAX_ROLE = 64


class ReviewerNameError(ProviderError, ValueError):
    """A reviewer name (or role) the store refuses: bad, or already a live reviewer's."""


def _at(value: int) -> datetime:
    moment = from_us(value)
    assert moment is not None
    return moment


def check_reviewer_name(name: object) -> str:
    """A reviewer's name: 1 to 64 printable characters, not blank, not ``rule:...``.

    ``rule:NAME`` is how a rules-file auto-decision is named as the decider: a
    person of that name would read as the rule.
    """
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= MAX_REVIEWER_NAME
        or not name.isprintable()
        or not name.strip()
    ):
        raise ReviewerNameError(
            f"a reviewer name must be 1 to {MAX_REVIEWER_NAME} printable characters"
        )
    if name.strip().casefold().startswith("rule:"):
        raise ReviewerNameError("a name may not start with 'rule:' (rules are named that way)")
    return name


def check_roles(roles: Sequence[str]) -> tuple[str, ...]:
    """Roles: each 1 to 64 printable characters without spaces; duplicates dropped."""
    for role in roles:
        if (
            not isinstance(role, str)
            or not 1 <= len(role) <= MAX_ROLE
            or not role.isprintable()
            or any(ch.isspace() for ch in role)
        ):
            raise ReviewerNameError(
                f"a role must be 1 to {MAX_ROLE} printable characters without spaces"
            )
    return tuple(dict.fromkeys(roles))


class CredentialsMixin(SQLStoreBase):
    """Create, check and revoke credentials; open and read review sessions."""

    def _insert_credential(
        self, tx: Tx, kind: str, name: str, token: str, roles: Sequence[str] = ()
    ) -> str:
        credential_id = "cred_" + secrets.token_hex(6)
        tx.execute(
            "INSERT INTO credentials (id, kind, name, token_sha256, created_at, roles) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                credential_id,
                kind,
                name,
                sha256(token),
                to_us(self.now()),
                canonical_json(list(roles)) if roles else None,
            ),
        )
        logger.info("created %s credential %r", kind, name)
        return credential_id

    def create_credential(
        self, kind: str, name: str, *, token: str | None = None, roles: Sequence[str] = ()
    ) -> str:
        """Create a credential and return its plaintext token (stored only as a sha256).

        ``kind`` is ``"instance"`` (an adapter: create, read, cancel its own
        requests) or ``"reviewer"`` (a person: list and decide). ``token``: a
        known one to use (see :func:`check_given_token`), else a random one.
        ``roles``: a reviewer's roles (see :meth:`add_reviewer` for a named one).
        """
        if kind not in CREDENTIAL_KINDS:
            raise ValueError(f"kind must be one of {CREDENTIAL_KINDS}, not {kind!r}")
        if not name:
            raise ValueError("a credential needs a name")
        if token is None:
            token = _TOKEN_PREFIX[kind] + secrets.token_urlsafe(32)
        else:
            check_given_token(token, kind)
        roles = check_roles(roles)
        with self._writing() as tx:
            self._insert_credential(tx, kind, name, token, roles)
        return token

    # ------------------------------------------------------------------ named reviewers

    def add_reviewer(
        self, name: str, *, roles: Sequence[str] = (), source: str = "cli", actor: str = "cli"
    ) -> str:
        """Add a named reviewer and return their token (shown once, stored as a sha256).

        Raises :class:`ReviewerNameError` for a bad name or role, or a name a
        live reviewer already has (two instances adding one name at once make one).
        """
        return self._add_named(REVIEWER, name, check_roles(roles), source=source, actor=actor)

    def _add_named(
        self, kind: str, name: str, roles: tuple[str, ...], *, source: str, actor: str
    ) -> str:
        """A named reviewer or agent: one live credential per name and kind, audited."""
        check_reviewer_name(name)
        token = _TOKEN_PREFIX[kind] + secrets.token_urlsafe(32)
        who = _WHO[kind]
        with self._writing() as tx:
            tx.lock(who + "s")
            if tx.execute(
                "SELECT 1 FROM credentials WHERE kind = ? AND name = ? AND revoked_at IS NULL",
                (kind, name),
            ).fetchone():
                raise ReviewerNameError(f"a live {who} is already named {name!r}")
            self._insert_credential(tx, kind, name, token, roles)
            detail: dict[str, Any] = {"name": name}
            if kind == REVIEWER:
                detail["roles"] = list(roles)
            insert_audit(
                tx,
                at=self.now(),
                actor=actor,
                source=source,
                action=f"{who}.added",
                request_id=None,
                detail=detail,
            )
        return token

    def list_reviewers(self) -> list[Credential]:
        """Every live reviewer credential, oldest first (never a token: none is stored)."""
        return [c for c in self.list_credentials() if c.is_reviewer and c.revoked_at is None]

    def remove_reviewer(self, name: str, *, source: str = "cli", actor: str = "cli") -> bool:
        """Revoke the live reviewer of this name; their page sessions end at once.

        False when no live reviewer has the name.
        """
        return self._remove_named(REVIEWER, name, source=source, actor=actor)

    def _remove_named(self, kind: str, name: str, *, source: str, actor: str) -> bool:
        """Revoke the live reviewer or agent of this name (see :meth:`_revoke_in`), audited."""
        now = self.now()
        who = _WHO[kind]
        with self._writing() as tx:
            tx.lock(who + "s")
            rows = tx.execute(
                "SELECT id FROM credentials WHERE kind = ? AND name = ? AND revoked_at IS NULL",
                (kind, name),
            ).fetchall()
            for row in rows:
                self._revoke_in(tx, row[0], name, now)
            if rows:
                insert_audit(
                    tx,
                    at=now,
                    actor=actor,
                    source=source,
                    action=f"{who}.removed",
                    request_id=None,
                    detail={"name": name},
                )
        return bool(rows)

    def ensure_initial_credentials(
        self, *, instance_token: str | None = None, reviewer_token: str | None = None
    ) -> FirstStartTokens | None:
        """On a store with no instance credential yet, create one of each kind.

        Returns their plaintext tokens (to be shown once), or None if any
        credential already existed. Given tokens (containers, CI) are used on
        a first start; on a later one each must already be a live credential
        of its kind, else ``ValueError`` (a typo must not go unnoticed). Two
        instances starting at once on one empty database make one pair.
        """
        given = ((INSTANCE, instance_token), (REVIEWER, reviewer_token))
        for kind, token in given:
            if token is not None:
                check_given_token(token, kind)
        with self._writing() as tx:
            tx.lock("initial-credentials")
            # No instance credential yet: a first start, even when named reviewers
            # were added (``reviewers add``) before the first ``serve``.
            if not tx.execute(
                "SELECT COUNT(*) FROM credentials WHERE kind = ?", (INSTANCE,)
            ).fetchone()[0]:
                tokens = FirstStartTokens(
                    instance=instance_token or _TOKEN_PREFIX[INSTANCE] + secrets.token_urlsafe(32),
                    reviewer=reviewer_token or _TOKEN_PREFIX[REVIEWER] + secrets.token_urlsafe(32),
                )
                self._insert_credential(tx, INSTANCE, "instance", tokens.instance)
                self._insert_credential(tx, REVIEWER, "reviewer", tokens.reviewer)
                return tokens
        for kind, token in given:
            known = None if token is None else self.authenticate(token)
            if token is not None and (known is None or known.kind != kind):
                raise ValueError(
                    f"the given {kind} token is not a live {kind} credential of this "
                    "database (known tokens are set only on its first start)"
                )
        return None

    def authenticate(self, token: str) -> Credential | None:
        """The live credential whose token this is, or None."""
        if not token:
            return None
        with self._reading() as db:
            row = db.execute(
                "SELECT * FROM credentials WHERE token_sha256 = ? AND revoked_at IS NULL",
                (sha256(token),),
            ).fetchone()
        return None if row is None else credential_from_row(row)

    def credential(self, credential_id: str) -> Credential | None:
        """A credential by id (revoked ones included), or None."""
        with self._reading() as db:
            row = db.execute("SELECT * FROM credentials WHERE id = ?", (credential_id,)).fetchone()
        return None if row is None else credential_from_row(row)

    def list_credentials(self) -> list[Credential]:
        """Every credential, oldest first (without tokens, which are not stored)."""
        with self._reading() as db:
            rows = db.execute(
                f"SELECT * FROM credentials ORDER BY created_at, {self._ORDER_KEY}"
            ).fetchall()
        return [credential_from_row(row) for row in rows]

    def revoke_credential(self, credential_id: str) -> bool:
        """Revoke a credential (and its review sessions). False if there was none live."""
        now = self.now()
        with self._writing() as tx:
            row = returned(
                tx.execute(
                    "SELECT name FROM credentials WHERE id = ? AND revoked_at IS NULL",
                    (credential_id,),
                )
            )
            if row is not None:
                self._revoke_in(tx, credential_id, str(row[0]), now)
        return row is not None

    def _revoke_in(self, tx: Tx, credential_id: str, name: str, now: datetime) -> None:
        """Inside a transaction: the credential revoked, and everything that rested on it ended.

        Its review sessions, the grants it gave, approved or made calls under, and
        its approvals counted toward quorums not yet complete (each pending
        request's list rewritten without them).
        """
        tx.execute(
            "UPDATE credentials SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            (to_us(now), credential_id),
        )
        tx.execute("DELETE FROM sessions WHERE credential_id = ?", (credential_id,))
        end_grants_of(tx, credential_id, name, now)
        pending = [
            str(one[0])
            for one in tx.execute(
                "SELECT a.request_id FROM approvals a JOIN requests r ON r.id = a.request_id "
                "WHERE a.reviewer_id = ? AND r.status = ?",
                (credential_id, PENDING),
            ).fetchall()
        ]
        for request_id in sorted(pending):
            tx.lock("request:" + request_id)
            tx.execute(
                "DELETE FROM approvals WHERE request_id = ? AND reviewer_id = ?",
                (request_id, credential_id),
            )
            kept = [
                Approval(by=str(one["name"]), at=_at(one["at"]))
                for one in tx.execute(
                    "SELECT name, at FROM approvals WHERE request_id = ? ORDER BY at",
                    (request_id,),
                ).fetchall()
            ]
            tx.execute(
                "UPDATE requests SET approval_list = ? WHERE id = ? AND status = ?",
                (approvals_text(kept) if kept else None, request_id, PENDING),
            )
            insert_audit(
                tx,
                at=now,
                actor="system",
                source="system",
                action="request.approval_withdrawn",
                request_id=request_id,
                detail={"name": name, "reason": f"{name} was removed"},
            )

    # ------------------------------------------------------------------ named agents

    def add_agent(self, name: str, *, source: str = "cli", actor: str = "cli") -> str:
        """Add a named agent (an instance credential) and return its token, shown once.

        Raises :class:`ReviewerNameError` for a bad name or one a live agent has.
        """
        return self._add_named(INSTANCE, name, (), source=source, actor=actor)

    def list_agents(self) -> list[Credential]:
        """Every live agent (instance credential), oldest first."""
        return [c for c in self.list_credentials() if not c.is_reviewer and c.revoked_at is None]

    def remove_agent(self, name: str, *, source: str = "cli", actor: str = "cli") -> bool:
        """Revoke the live agent of this name: its calls are refused, its grants end at once."""
        return self._remove_named(INSTANCE, name, source=source, actor=actor)

    # ------------------------------------------------------------------ sessions

    def create_session(self, reviewer: Credential) -> tuple[str, Session]:
        """A review-page session for a reviewer: ``(session id for the cookie, session)``."""
        if not reviewer.is_reviewer:
            raise ValueError("only a reviewer credential can open a review session")
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        now = self.now()
        expires = now + SESSION_LIFETIME
        with self._writing() as tx:
            tx.execute(
                "INSERT INTO sessions (id_sha256, credential_id, csrf_token, created_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?)",
                (sha256(session_id), reviewer.id, csrf, to_us(now), to_us(expires)),
            )
        return session_id, Session(credential=reviewer, csrf_token=csrf, expires_at=expires)

    def session(self, session_id: str) -> Session | None:
        """The live session with this id whose credential is still live, or None."""
        if not session_id:
            return None
        with self._reading() as db:
            row = db.execute(
                "SELECT s.csrf_token, s.expires_at AS session_expires_at, c.* FROM sessions s "
                "JOIN credentials c ON c.id = s.credential_id "
                "WHERE s.id_sha256 = ? AND s.expires_at > ? AND c.revoked_at IS NULL",
                (sha256(session_id), to_us(self.now())),
            ).fetchone()
        if row is None:
            return None
        expires = from_us(row["session_expires_at"])
        assert expires is not None
        return Session(
            credential=credential_from_row(row), csrf_token=row["csrf_token"], expires_at=expires
        )
