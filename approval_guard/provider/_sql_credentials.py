"""Credentials and review-page sessions: who may call the provider, kept only as hashes."""

from __future__ import annotations

import logging
import secrets

from approval_guard.provider._checks import check_given_token
from approval_guard.provider._models import (
    CREDENTIAL_KINDS,
    INSTANCE,
    REVIEWER,
    SESSION_LIFETIME,
    Credential,
    FirstStartTokens,
    Session,
)
from approval_guard.provider._sql_base import (
    SQLStoreBase,
    Tx,
    credential_from_row,
    from_us,
    sha256,
    to_us,
)

logger = logging.getLogger("approval_guard.provider")

_TOKEN_PREFIX = {INSTANCE: "agi_", REVIEWER: "agr_"}


class CredentialsMixin(SQLStoreBase):
    """Create, check and revoke credentials; open and read review sessions."""

    def _insert_credential(self, tx: Tx, kind: str, name: str, token: str) -> None:
        tx.execute(
            "INSERT INTO credentials (id, kind, name, token_sha256, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            ("cred_" + secrets.token_hex(6), kind, name, sha256(token), to_us(self.now())),
        )
        logger.info("created %s credential %r", kind, name)

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
        with self._writing() as tx:
            self._insert_credential(tx, kind, name, token)
        return token

    def ensure_initial_credentials(
        self, *, instance_token: str | None = None, reviewer_token: str | None = None
    ) -> FirstStartTokens | None:
        """On a store with no credentials at all, create one of each kind.

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
            if not tx.execute("SELECT COUNT(*) FROM credentials").fetchone()[0]:
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
        with self._writing() as tx:
            changed = tx.execute(
                "UPDATE credentials SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (to_us(self.now()), credential_id),
            ).rowcount
            tx.execute("DELETE FROM sessions WHERE credential_id = ?", (credential_id,))
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
