"""What a Slack click or modal does: the same decision as the API's, and the reply saying so.

A Slack user decides as the reviewer they are linked to
(``reviewers add|link NAME --slack-user U...``), through the one decision
function every channel uses (:mod:`approval_guard.provider.channels.decisions`:
roles, self-approval, the quorum, ``max_valid_for``, edits, grants and the
audit row, whose ``channel`` is ``"slack"`` and ``channel_user`` the Slack
user id). Whatever it refuses is refused here the same way, nothing is
recorded, and the person is told why in a reply only they see.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from approval_guard._codec.wire import APPROVED, CANCELLED, DENIED, EXPIRED, PENDING
from approval_guard.provider.channels import decisions as channel_decisions
from approval_guard.provider.channels.slack.blocks import (
    MAX_INPUT,
    approvals_line,
    code,
    may_edit,
    text,
    when,
)
from approval_guard.provider.rules.checks import refusal
from approval_guard.provider.rules.config import Rules
from approval_guard.provider.store.checks import with_edits
from approval_guard.provider.store.models import (
    AlreadyApproved,
    Credential,
    InvalidEdit,
    NotPendingError,
    StoredRequest,
)
from approval_guard.provider.store.protocol import StoreProtocol
from approval_guard.provider.store.sql.grant_tables import MAX_USES, GrantSpec

NOT_LINKED = (
    "Not recorded: your Slack user ({user}) is not linked to a reviewer of this provider. "
    "An operator can link it: `approval-guard reviewers link NAME --slack-user {user}`."
)


@attrs.frozen
class Outcome:
    """A decision's result for the person who clicked: recorded or not, and the reply."""

    recorded: bool
    reply: str


def stale(request: StoredRequest) -> str:
    """Why a click on an old message does nothing: ``"... no longer pending (expired at ...)"``."""
    decision = request.decision
    if request.status == EXPIRED:
        why = f"expired at {when(request.deadline_at)}"
    elif request.status == CANCELLED and request.cancelled_at is not None:
        why = f"cancelled at {when(request.cancelled_at)}"
    elif decision is not None:
        by = f" by {text(decision.decided_by)}" if decision.decided_by else ""
        why = f"{text(request.status)}{by} at {when(decision.decided_at)}"
    else:
        why = text(request.status)
    return f"Not recorded: this request is no longer pending ({why})."


def reviewer_of(store: StoreProtocol, slack_user: str) -> Credential | None:
    """The live reviewer a Slack user id is linked to (None: unknown, or removed)."""
    return store.reviewer_by_identity("slack", slack_user)


def check_may_open(
    store: StoreProtocol, rules: Rules, slack_user: str, request_id: str, *, edit: bool
) -> tuple[StoredRequest | None, str | None]:
    """Before a modal opens: ``(request, None)``, or ``(None, why not)`` as the reply.

    The same checks the decision will make, so nobody types a reason or an
    edit that would then be refused; the decision checks them all again.
    """
    reviewer = reviewer_of(store, slack_user)
    if reviewer is None:
        return None, NOT_LINKED.format(user=text(slack_user))
    request = store.get_request(request_id)
    if request is None:
        return None, "Not recorded: this provider has no such request."
    if request.status != PENDING:
        return None, stale(request)
    why = refusal(request, rules.for_tool(request.tool), reviewer, APPROVED if edit else DENIED)
    if why is not None:
        return None, f"Not recorded: {text(why)}."
    if edit and not may_edit(request):
        return None, "Not recorded: this request's arguments cannot be edited."
    if edit and any(one.by == reviewer.name for one in request.approvals):
        return None, f"Not recorded: {text(reviewer.name)} has already approved this request."
    return request, None


def decide(
    store: StoreProtocol,
    rules: Rules,
    slack_user: str,
    request_id: str,
    status: str,
    *,
    note: str | None = None,
    arguments: dict[str, Any] | None = None,
    grant: GrantSpec | None = None,
) -> Outcome:
    """Record one Slack user's decision through the one decision function (blocking).

    ``grant`` (API 1.3, "Approve and allow for…") is given with an approval.
    """
    reviewer = reviewer_of(store, slack_user)
    if reviewer is None:
        return Outcome(False, NOT_LINKED.format(user=text(slack_user)))
    try:
        found, given = channel_decisions.decide(
            store,
            rules,
            request_id,
            reviewer,
            status,
            note=note,
            arguments=arguments,
            source="slack",
            channel="slack",
            channel_user=slack_user,
            grant=grant,
        )
    except channel_decisions.REFUSALS as exc:
        return Outcome(False, _refused(exc))
    if found is None:
        return Outcome(False, "Not recorded: this provider has no such request.")
    if given is None:
        return Outcome(True, confirmation(found))
    uses = "" if given.uses is None else f", for at most {given.uses} calls"
    waiting = (
        f" It needs {given.approvals_required} approvals before it covers anything."
        if given.status == "pending"
        else ""
    )
    return Outcome(
        True,
        f"{confirmation(found)} Standing grant {text(given.id)} approves calls like this one "
        f"until {when(given.expires_at)}{uses}.{waiting} "
        "Revoke it on the review page or with `approval-guard grants revoke ID`.",
    )


def _refused(exc: Exception) -> str:
    """The reply to a refusal of the one decision function (nothing was recorded)."""
    if isinstance(exc, NotPendingError):
        return stale(exc.request)
    if isinstance(exc, AlreadyApproved):
        return f"Not recorded: {text(str(exc))} ({approvals_line(exc.request)})."
    return f"Not recorded: {text(str(exc))}."


def decide_all(
    store: StoreProtocol,
    rules: Rules,
    slack_user: str,
    request_ids: list[str],
    status: str,
    *,
    note: str | None = None,
) -> Outcome:
    """A batch button (API 1.3): :func:`decide` for each listed id in turn, as if alone.

    Exactly the ids the message listed; a refused one never stops the others.
    The reply has one line per id, in the message's order.
    """
    lines = []
    recorded = False
    for request_id in request_ids:
        outcome = decide(store, rules, slack_user, request_id, status, note=note)
        recorded = recorded or outcome.recorded
        lines.append(f"{code(request_id, 80)}: {outcome.reply}")
    verb = "Approve" if status == APPROVED else "Deny"
    return Outcome(recorded, f"{verb} all {len(request_ids)}:\n" + "\n".join(lines))


def confirmation(request: StoredRequest) -> str:
    """What the decider is told once it is recorded."""
    if request.status == PENDING:
        return f"Your approval is counted: {approvals_line(request)}."
    decision = request.decision
    if request.status == APPROVED and decision is not None:
        until = (
            f" The call may start until {when(decision.expires_at)}." if decision.expires_at else ""
        )
        return f"Approved.{until}"
    return "Denied. The agent receives your reason."


def parse_edits(
    request: StoredRequest, values: Mapping[str, str]
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The edit modal's inputs (block ``arg<i>`` -> text) as ``(arguments, errors by block)``.

    Each text is parsed as the page and the CLI parse it (``with_edits``:
    exact JSON); an input left empty keeps its value. ``arguments`` is None
    when nothing was changed (an approval as it is) or when an input is
    refused; ``errors`` then says why, by block.
    """
    edits: dict[str, str] = {}
    errors: dict[str, str] = {}
    for index, name in enumerate(request.editable):
        typed = values.get(f"arg{index}")
        if typed is None or not typed.strip():
            continue
        if len(typed) > MAX_INPUT:
            # Never cut: a cut value may still parse, as a value nobody typed.
            errors[f"arg{index}"] = f"at most {MAX_INPUT} characters"
            continue
        try:
            with_edits(request, {name: typed})
        except InvalidEdit as exc:
            errors[f"arg{index}"] = str(exc)[:150]
            continue
        edits[name] = typed
    if errors or not edits:
        return None, errors
    return with_edits(request, edits), {}


# ---------------------------------------------------------------- standing grants (API 1.3)


def check_may_grant(
    store: StoreProtocol, rules: Rules, slack_user: str, request_id: str
) -> tuple[StoredRequest | None, str | None]:
    """Before "Approve and allow for…" opens: as :func:`check_may_open` for an approval.

    Also refused at once: a tool whose rule turns grants off. The decision
    (the store's, in its transaction) checks everything again.
    """
    request, why = check_may_open(store, rules, slack_user, request_id, edit=False)
    if request is None:
        return None, why
    reviewer = reviewer_of(store, slack_user)
    rule = rules.for_tool(request.tool)
    refused = None if reviewer is None else refusal(request, rule, reviewer, APPROVED)
    if reviewer is None or refused is not None:
        return None, f"Not recorded: {text(refused or 'you are no longer a reviewer')}."
    if not rule.grants:
        return None, f"Not recorded: standing grants are turned off for {text(request.tool)}."
    if any(one.by == reviewer.name for one in request.approvals):
        return None, f"Not recorded: {text(reviewer.name)} has already approved this request."
    return request, None


def parse_uses(typed: str | None) -> tuple[int | None, str | None]:
    """The modal's ``uses`` text: ``(None, None)`` when empty, else ``(n, None)`` or an error."""
    if typed is None or not typed.strip():
        return None, None
    value = typed.strip()
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_USES:
        return None, f"a whole number from 1 to {MAX_USES}, or empty for no limit"
    return int(value), None
