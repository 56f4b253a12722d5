"""Applying a tool's rule to one decision: may this reviewer decide it, and until when is it valid.

Pure functions over the store's models, shared by the stores (which refuse)
and the review page's backend (which shows why a reviewer may not decide).
"""

from __future__ import annotations

import unicodedata
from datetime import datetime, timedelta, timezone

from approval_guard._codec.duration import format_duration
from approval_guard._codec.wire import APPROVED
from approval_guard.provider.http.limits import DEFAULT_VALID_FOR_SECONDS
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.store.models import (
    Credential,
    Forbidden,
    StoredRequest,
    ValidityTooLong,
)


def check_may_decide(
    request: StoredRequest, rule: ToolRule, reviewer: Credential, status: str
) -> None:
    """:class:`Forbidden`, saying why, when this reviewer may not make this decision."""
    why = refusal(request, rule, reviewer, status)
    if why is not None:
        raise Forbidden(why)


def refusal(
    request: StoredRequest, rule: ToolRule, reviewer: Credential, status: str = APPROVED
) -> str | None:
    """Why ``reviewer`` may not decide ``request`` under ``rule`` (None: they may)."""
    if not rule.may_decide(reviewer.roles):
        has = ", ".join(reviewer.roles) if reviewer.roles else "no role"
        return (
            f"deciding {request.tool} needs the role {' or '.join(rule.approvers or ())}; "
            f"{reviewer.name} has {has}"
        )
    if (
        status == APPROVED
        and not rule.self_approval
        and request.requested_by is not None
        and same_person(reviewer.name, request.requested_by)
    ):
        return f"{reviewer.name} asked for this request and may not approve it themselves"
    return None


def _person(name: str) -> str:
    """A name as compared: compatibility forms folded, case ignored, invisible characters gone."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    kept = "".join(ch for ch in folded if ch.isprintable() and unicodedata.category(ch) != "Cf")
    return " ".join(kept.split())


def same_person(reviewer_name: str, requested_by: str) -> bool:
    """Whether ``requested_by`` names this reviewer ("Alice", fullwidth "alice" all do)."""
    return _person(reviewer_name) == _person(requested_by)


def approval_expiry(
    tool: str,
    rule: ToolRule,
    now: datetime,
    valid_for: float | timedelta | None,
    expires_at: datetime | None,
) -> datetime:
    """When an approval stops being valid; :class:`ValidityTooLong` beyond the rule's limit."""
    limit = None if rule.max_valid_for is None else timedelta(seconds=rule.max_valid_for)
    if expires_at is not None:
        expires = expires_at.astimezone(timezone.utc)
        delta = expires - now
    elif valid_for is None:
        delta = timedelta(seconds=DEFAULT_VALID_FOR_SECONDS)
        if limit is not None:
            delta = min(delta, limit)
        expires = now + delta
    else:
        delta = valid_for if isinstance(valid_for, timedelta) else timedelta(seconds=valid_for)
        expires = now + delta
    if limit is not None and delta > limit:
        raise ValidityTooLong(
            f"an approval of {tool} may stay valid for at most "
            f"{format_duration(rule.max_valid_for or 0)} (max_valid_for)"
        )
    return expires
