"""Ending a pending request by a reviewer's decision (with edits, or giving a grant).

Each is one transaction whose ``UPDATE ... WHERE status = 'pending'`` decides a
race: of two deciders (threads, processes or instances) exactly one changes the
row; the others see :class:`NotPendingError` with the winner's result.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from typing import Any

from approval_guard._codec.exact_json import canonical_json, check_json_value
from approval_guard._codec.wire import APPROVED, DENIED, PENDING, format_timestamp
from approval_guard.exceptions import ProviderError
from approval_guard.provider.rules.checks import approval_expiry, check_may_decide
from approval_guard.provider.rules.config import NO_RULES, Rules
from approval_guard.provider.store.checks import changed_names, check_edit
from approval_guard.provider.store.models import (
    AlreadyApproved,
    Approval,
    Credential,
    Grant,
    GrantRefused,
    InvalidEdit,
    LinkUsed,
    NotPendingError,
    StoredRequest,
)
from approval_guard.provider.store.sql.base import (
    Tx,
    approvals_text,
    from_us,
    insert_audit,
    request_from_row,
    returned,
    to_us,
)
from approval_guard.provider.store.sql.grant_reviews import GrantReviewsMixin
from approval_guard.provider.store.sql.grant_tables import GrantSpec, live_reviewer
from approval_guard.provider.store.sql.requests import RACE_ATTEMPTS, RequestsMixin

logger = logging.getLogger("approval_guard.provider")

#: Where a decision may come from (the audit rows' ``channel``): these, or a channel's name.
CHANNELS = ("api", "page", "cli", "slack", "email")
_CHANNEL_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


class _LostRace(ProviderError):
    """Raised inside a decision's transaction to undo it (and its link's use): it lost a race."""


class _Overdue(ProviderError):
    """Raised inside a decision's transaction: the request's deadline passed; expire it first."""


class DecisionsMixin(GrantReviewsMixin, RequestsMixin):
    """Decide and cancel pending requests (a decision may give a standing grant)."""

    def decide(
        self,
        request_id: str,
        *,
        reviewer: Credential,
        status: str,
        note: str | None = None,
        valid_for: float | timedelta | None = 300,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
        rules: Rules | None = None,
        source: str = "api",
        channel: str = "api",
        channel_user: str | None = None,
        use_once: str | None = None,
        grant: GrantSpec | None = None,
    ) -> StoredRequest | None:
        """Record a reviewer's decision on a pending request; None if unknown.

        ``valid_for`` (seconds or a timedelta) sets ``expires_at = decided_at +
        valid_for`` for an approval; ``expires_at`` overrides it; None means the
        default (five minutes, or the tool's ``max_valid_for`` if shorter).
        Neither is checked for sign here, so tests can make an approval that
        has already expired; the HTTP layer validates them. Raises
        :class:`NotPendingError`.

        ``rules`` (the server's rules file) says who may decide the request's
        tool (:class:`Forbidden` otherwise, as for a ``requested_by`` person
        approving their own request when the rule forbids it), how long an
        approval may stay valid (:class:`ValidityTooLong`) and how many distinct
        people must approve (kept on the request when it was created). Until
        that many have, an approval is counted (a second one by the same person
        is :class:`AlreadyApproved`) and the request stays pending; the last
        one approves it, ``decided_by`` naming everyone, in order. One denial
        denies. Counting happens under the request's lock inside one
        transaction, so racing approvals (threads, processes, instances) each
        count exactly once and exactly one completes.

        ``arguments`` (API 1.1) is the whole arguments object with the
        reviewer's edits applied (:func:`with_edits` makes one from JSON
        texts); :func:`check_edit` says what is refused (:class:`InvalidEdit`).
        When it differs from the request's own arguments it is kept exactly,
        echoed as ``decision.arguments`` and recorded in the history with each
        changed name's value before and after; when it equals them it is no edit.

        ``channel`` (``"api"``, ``"page"``, ``"cli"``, ``"slack"``, ``"email"``)
        and ``channel_user`` (the Slack user id or email address, else None)
        say in the audit rows' detail where the decision came from.
        ``use_once`` (an email link's id) is recorded as used in the
        decision's own transaction: a decision with an id already used is
        :class:`LinkUsed`, and records nothing.

        The reviewer's credential and roles are read again inside the
        decision's transaction: a reviewer removed before it commits is
        :class:`Forbidden`, and a removed reviewer's approval no longer counts
        toward a quorum. ``grant`` (API 1.3) gives a standing grant (a standing
        denial with a denial) in the same transaction (:meth:`decide_granting`
        returns it).
        """
        return self.decide_granting(
            request_id,
            reviewer=reviewer,
            status=status,
            note=note,
            valid_for=valid_for,
            expires_at=expires_at,
            arguments=arguments,
            rules=rules,
            source=source,
            channel=channel,
            channel_user=channel_user,
            use_once=use_once,
            grant=grant,
        )[0]

    def decide_granting(
        self,
        request_id: str,
        *,
        reviewer: Credential,
        status: str,
        note: str | None = None,
        valid_for: float | timedelta | None = 300,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
        rules: Rules | None = None,
        source: str = "api",
        channel: str = "api",
        channel_user: str | None = None,
        use_once: str | None = None,
        grant: GrantSpec | None = None,
    ) -> tuple[StoredRequest | None, Grant | None]:
        """:meth:`decide`, and the grant it gave (None when it gave none)."""
        if status not in (APPROVED, DENIED):
            raise ValueError(f"a decision is 'approved' or 'denied', not {status!r}")
        if not isinstance(channel, str) or not _CHANNEL_NAME.fullmatch(channel):
            raise ValueError(f"a decision's channel is a channel's name, not {channel!r}")
        check_json_value(note)
        if arguments is not None and status != APPROVED:
            raise InvalidEdit("a denial cannot carry 'arguments': only an approval can edit")
        via = {"channel": channel, "channel_user": channel_user}
        for _ in range(RACE_ATTEMPTS):
            given: list[str] = []
            try:
                # One transaction: the request read under its lock, every check, the write.
                with self._writing() as tx:
                    row = self._decide_in(
                        tx,
                        request_id,
                        reviewer,
                        status,
                        note,
                        valid_for,
                        expires_at,
                        arguments,
                        rules,
                        source,
                        via,
                        use_once,
                        grant,
                        given,
                    )
            except _Overdue:
                self._expire([request_id])  # the next round reads it expired
                continue
            except _LostRace:
                continue
            if row is None:
                return None, None
            return request_from_row(row), self.get_grant(given[0]) if given else None
        return self._not_pending(request_id), None

    def _decide_in(
        self,
        tx: Tx,
        request_id: str,
        reviewer: Credential,
        status: str,
        note: str | None,
        valid_for: float | timedelta | None,
        expires_at: datetime | None,
        arguments: dict[str, Any] | None,
        rules: Rules | None,
        source: str,
        via: dict[str, str | None],
        use_once: str | None,
        grant: GrantSpec | None = None,
        given: list[str] | None = None,
    ) -> Any:
        """Inside the decision's transaction: the row it left, None if unknown; raises refusals."""
        tx.lock("request:" + request_id)
        # Read under the lock: what an approval on another instance committed is seen here.
        row = tx.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        if row is None:
            return None
        current = request_from_row(row)
        now = self.now()
        if current.status == PENDING and current.deadline_at <= now:
            raise _Overdue
        if current.status != PENDING:
            raise NotPendingError(current)
        # Who decides, as this transaction sees them: removed since their token was read?
        reviewer = live_reviewer(tx, reviewer)
        rule = (rules or NO_RULES).for_tool(current.tool)
        check_may_decide(current, rule, reviewer, status)
        edited = check_edit(current, status, arguments)
        if grant is not None and edited is not None:
            raise GrantRefused("a grant covers calls as they are asked: it cannot carry edits")
        if edited is not None and current.approvals_required > 1:
            raise InvalidEdit(
                "this request needs several approvals; its arguments cannot be edited"
            )
        expires = None
        if status == APPROVED:
            expires = approval_expiry(current.tool, rule, now, valid_for, expires_at)
        detail: dict[str, Any] = {"status": status, "note": note}
        if expires is not None:
            detail["expires_at"] = format_timestamp(expires)
        if edited is not None:
            detail["edits"] = {
                name: {"before": current.arguments[name], "after": edited[name]}
                for name in changed_names(current.arguments, edited)
            }
        if use_once is not None:
            self._use_once(tx, use_once, current, now)
        row = self._record(
            tx, current, reviewer, status, note, now, expires, edited, detail, source, via
        )
        if row is None:
            # Lost a race with the clock (the deadline passed): undo it all, link use too.
            raise _LostRace
        if grant is not None:
            grant_id = self._give_grant(
                tx, current, row["owner_id"], reviewer, status, note, grant, rule, now, source
            )
            if given is not None:
                given.append(grant_id)
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
        return row

    def _record(
        self,
        tx: Tx,
        current: StoredRequest,
        reviewer: Credential,
        status: str,
        note: str | None,
        now: datetime,
        expires: datetime | None,
        edited: dict[str, Any] | None,
        detail: dict[str, Any],
        source: str,
        via: dict[str, str | None],
    ) -> Any:
        """One decision inside its transaction, on the request read under its lock.

        The row it left, or None if the request's deadline passed meanwhile.
        """
        request_id = current.id
        required = current.approvals_required
        approvals = current.approvals
        if required > 1:
            # Only approvals by reviewers still here count (one removed since no longer does).
            approvals = self._live_approvals(tx, request_id)
        n = len(approvals)
        if status == APPROVED:
            if any(one.by == reviewer.name for one in approvals):
                raise AlreadyApproved(f"{reviewer.name} has already approved this request", current)
            # The table holds each person to one approval of a request that needs several;
            # one that needs one is decided by this very approval.
            if (
                required > 1
                and not tx.execute(
                    "INSERT INTO approvals (request_id, reviewer_id, name, at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (request_id, reviewer.id, reviewer.name, to_us(now)),
                ).rowcount
            ):
                raise AlreadyApproved(f"{reviewer.name} has already approved this request", current)
            approvals = (*approvals, Approval(by=reviewer.name, at=now))
            n = len(approvals)
        audit_detail: dict[str, Any] = {"note": note, **via}
        if status == APPROVED:
            audit_detail.update({"n": n, "of": required, "approvals": f"{n} of {required}"})
        if status == APPROVED and n < required:
            row = returned(
                tx.execute(
                    "UPDATE requests SET approval_list = ? "
                    "WHERE id = ? AND status = ? AND deadline_at > ? RETURNING *",
                    (approvals_text(approvals), request_id, PENDING, to_us(now)),
                )
            )
            if row is None:
                return None
            tx.event(request_id, "approval", now, reviewer.id, {**audit_detail})
            insert_audit(
                tx,
                at=now,
                actor=reviewer.name,
                source=source,
                action="request.approval",
                request_id=request_id,
                detail=audit_detail,
            )
            return row
        names = ", ".join(one.by for one in approvals) if status == APPROVED else reviewer.name
        row = returned(
            tx.execute(
                "UPDATE requests SET status = ?, decision_status = ?, "
                "decision_note = ?, decided_at = ?, expires_at = ?, decided_by = ?, "
                "decision_arguments = ?, decided_by_name = ?, approval_list = ? "
                "WHERE id = ? AND status = ? AND deadline_at > ? RETURNING *",
                (
                    status,
                    status,
                    note,
                    to_us(now),
                    None if expires is None else to_us(expires),
                    reviewer.id,
                    None if edited is None else canonical_json(edited),
                    names,
                    approvals_text(approvals) if approvals else None,
                    request_id,
                    PENDING,
                    to_us(now),
                ),
            )
        )
        if row is None:
            return None
        tx.event(request_id, "decided", now, reviewer.id, {**detail, "decided_by": names})
        if expires is not None:
            audit_detail["expires_at"] = format_timestamp(expires)
        audit_detail["decided_by"] = names
        insert_audit(
            tx,
            at=now,
            actor=reviewer.name,
            source=source,
            action="request.approval" if status == APPROVED else "request.denial",
            request_id=request_id,
            detail=audit_detail,
        )
        if edited is not None:
            insert_audit(
                tx,
                at=now,
                actor=reviewer.name,
                source=source,
                action="request.edit",
                request_id=request_id,
                detail={"edits": detail["edits"], **via},
            )
        return row

    @staticmethod
    def _live_approvals(tx: Tx, request_id: str) -> tuple[Approval, ...]:
        """The counted approvals of a request whose reviewers are still live, in order."""
        rows = tx.execute(
            "SELECT a.name, a.at FROM approvals a JOIN credentials c ON c.id = a.reviewer_id "
            "WHERE a.request_id = ? AND c.revoked_at IS NULL ORDER BY a.at",
            (request_id,),
        ).fetchall()
        out = []
        for row in rows:
            at = from_us(row["at"])
            assert at is not None
            out.append(Approval(by=row["name"], at=at))
        return tuple(out)

    @staticmethod
    def _use_once(tx: Tx, link_id: str, current: StoredRequest, now: datetime) -> None:
        """Mark an email link used in the decision's transaction; :class:`LinkUsed` if it was."""
        if not tx.execute(
            "INSERT INTO used_links (link_id, request_id, used_at) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (link_id, current.id, to_us(now)),
        ).rowcount:
            raise LinkUsed("this link has already been used: a link decides once", current)
