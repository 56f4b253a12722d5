"""Ending a pending request: a reviewer's decision (with edits) or its owner's cancel.

Each is one transaction whose ``UPDATE ... WHERE status = 'pending'`` decides a
race: of two deciders (threads, processes or instances) exactly one changes the
row; the others see :class:`NotPendingError` with the winner's result.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

from approval_guard._json import canonical_json, check_json_value
from approval_guard._wire import APPROVED, CANCELLED, DENIED, PENDING, format_timestamp
from approval_guard.provider._checks import changed_names, check_edit
from approval_guard.provider._models import (
    Credential,
    InvalidEdit,
    NotPendingError,
    StoredRequest,
)
from approval_guard.provider._sql_base import request_from_row, returned, to_us
from approval_guard.provider._sql_requests import RequestsMixin

logger = logging.getLogger("approval_guard.provider")

# A race lost to a clock that moved back is retried this often before giving up.
_ATTEMPTS = 3


class DecisionsMixin(RequestsMixin):
    """Decide and cancel pending requests."""

    def decide(
        self,
        request_id: str,
        *,
        reviewer: Credential,
        status: str,
        note: str | None = None,
        valid_for: float | timedelta = 300,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> StoredRequest | None:
        """Record a reviewer's decision on a pending request; None if unknown.

        ``valid_for`` (seconds or a timedelta) sets ``expires_at = decided_at +
        valid_for`` for an approval; ``expires_at`` overrides it. Neither is
        checked for sign here, so tests can make an approval that has already
        expired; the HTTP layer validates them. Raises :class:`NotPendingError`.

        ``arguments`` (API 1.1) is the whole arguments object with the
        reviewer's edits applied (:func:`with_edits` makes one from JSON
        texts); :func:`check_edit` says what is refused (:class:`InvalidEdit`).
        When it differs from the request's own arguments it is kept exactly,
        echoed as ``decision.arguments`` and recorded in the history with each
        changed name's value before and after; when it equals them it is no edit.
        """
        if status not in (APPROVED, DENIED):
            raise ValueError(f"a decision is 'approved' or 'denied', not {status!r}")
        check_json_value(note)
        if arguments is not None and status != APPROVED:
            raise InvalidEdit("a denial cannot carry 'arguments': only an approval can edit")
        for _ in range(_ATTEMPTS):
            current = self._get(request_id)
            if current is None:
                return None
            if current.status != PENDING:
                raise NotPendingError(current)
            edited = check_edit(current, status, arguments)
            now = self.now()
            expires: datetime | None = None
            if status == APPROVED:
                if expires_at is not None:
                    expires = expires_at.astimezone(timezone.utc)
                else:
                    delta = (
                        valid_for
                        if isinstance(valid_for, timedelta)
                        else timedelta(seconds=valid_for)
                    )
                    expires = now + delta
            detail: dict[str, Any] = {"status": status, "note": note}
            if expires is not None:
                detail["expires_at"] = format_timestamp(expires)
            if edited is not None:
                detail["edits"] = {
                    name: {"before": current.arguments[name], "after": edited[name]}
                    for name in changed_names(current.arguments, edited)
                }
            with self._writing() as tx:
                row = returned(
                    tx.execute(
                        "UPDATE requests SET status = ?, decision_status = ?, "
                        "decision_note = ?, decided_at = ?, expires_at = ?, decided_by = ?, "
                        "decision_arguments = ? "
                        "WHERE id = ? AND status = ? AND deadline_at > ? RETURNING *",
                        (
                            status,
                            status,
                            note,
                            to_us(now),
                            None if expires is None else to_us(expires),
                            reviewer.id,
                            None if edited is None else canonical_json(edited),
                            request_id,
                            PENDING,
                            to_us(now),
                        ),
                    )
                )
                if row is not None:
                    tx.event(request_id, "decided", now, reviewer.id, detail)
            if row is None:
                # Lost a race (or the deadline passed): the next read says to whom.
                continue
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
            return request_from_row(row)
        return self._not_pending(request_id)

    def cancel(
        self, request_id: str, *, owner: Credential, reason: str | None = None
    ) -> StoredRequest | None:
        """Cancel a pending request of ``owner``'s; None if unknown or not theirs.

        Cancelling a cancelled request returns it unchanged. Raises
        :class:`NotPendingError` if it was approved, denied or expired.
        """
        check_json_value(reason)
        owner_filter = None if owner.is_reviewer else owner.id
        for _ in range(_ATTEMPTS):
            current = self._get(request_id, owner_filter)
            if current is None:
                return None
            if current.status == CANCELLED:
                return current
            if current.status != PENDING:
                raise NotPendingError(current)
            now = self.now()
            with self._writing() as tx:
                row = returned(
                    tx.execute(
                        "UPDATE requests SET status = ?, cancelled_at = ?, cancel_reason = ? "
                        "WHERE id = ? AND status = ? AND deadline_at > ? RETURNING *",
                        (CANCELLED, to_us(now), reason, request_id, PENDING, to_us(now)),
                    )
                )
                if row is not None:
                    tx.event(request_id, "cancelled", now, owner.id, {"reason": reason})
            if row is not None:
                logger.debug("request %s cancelled", request_id)
                return request_from_row(row)
        current = self._get(request_id, owner_filter)
        if current is not None and current.status == CANCELLED:
            return current
        return self._not_pending(request_id)

    def _not_pending(self, request_id: str) -> StoredRequest | None:
        current = self._get(request_id)
        if current is None:
            return None
        raise NotPendingError(current)
