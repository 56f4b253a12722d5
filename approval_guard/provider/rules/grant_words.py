"""Standing grants in a reviewer's words, for every channel: the offer, a grant, who decided.

The review page, Slack and the email page all say the same things about
grants, so the sentences are written here once, as plain text; each channel
escapes them its own way (the page's :func:`approval_guard._codec.display.escape`,
Slack's mrkdwn escaping, HTML). A scope's per-argument lines come from
:func:`approval_guard.provider.rules.scope.describe`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from approval_guard._codec.duration import format_duration
from approval_guard._codec.marker import holds_marker_key
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.rules.scope import ANY, SAME, describe, is_number
from approval_guard.provider.store.models import Grant, StoredRequest

#: The durations a reviewer picks a grant's ``for`` from (seconds), shortest first.
GRANT_DURATIONS = (5 * 60, 15 * 60, 30 * 60, 3600, 4 * 3600, 8 * 3600, 24 * 3600, 7 * 24 * 3600)
#: The choice offered first where the tool's ``max_grant`` allows it.
DEFAULT_GRANT_SECONDS = 3600
#: Whole prefix of the ``decided_by`` of a rules-file auto-decision (``rule:NAME``).
RULE_PREFIX = "rule:"


def grant_durations(max_grant: int) -> list[str]:
    """The ``for`` choices within a tool's ``max_grant`` (its own value last if not listed)."""
    seconds = [one for one in GRANT_DURATIONS if one <= max_grant]
    if max_grant not in seconds:
        seconds.append(max_grant)
    return [format_duration(one) for one in seconds]


def default_duration(max_grant: int) -> str:
    """The duration preselected: one hour, or the tool's ``max_grant`` when that is shorter."""
    return format_duration(min(DEFAULT_GRANT_SECONDS, max_grant))


def constraint_kinds(value: object) -> list[str]:
    """The constraints a reviewer may choose for an argument with this value.

    ``same`` and ``any`` always; ``range`` for a number, ``prefix`` for a
    string, ``in`` for any scalar; a redacted value only ``same`` or ``any``
    (scope.check_match refuses the others for it).
    """
    kinds = [SAME, ANY]
    if holds_marker_key(value):
        return kinds
    if is_number(value):
        kinds += ["range", "in"]
    elif isinstance(value, str):
        kinds += ["prefix", "in"]
    elif value is None or isinstance(value, bool):
        kinds.append("in")
    return kinds


def requested_by_words(mode: str, person: str | None) -> str:
    """Whose calls a grant covers: ``"only calls made for alice@example.com"``."""
    if mode == ANY:
        return "calls made for anyone"
    if person is None:
        return "only calls that, like this one, name nobody they are made for"
    return f"only calls made for {person}"


def grant_words(grant: Grant) -> list[str]:
    """A grant's scope in words: its tool and agent, one line per argument, whose calls."""
    verb = "approves" if grant.decision == "approved" else "denies"
    lines = [f"{verb} calls to {grant.tool} from agent {grant.agent}"]
    lines += describe(grant.match, grant.arguments)
    lines.append(requested_by_words(grant.requested_by, grant.for_requested_by))
    return lines


def same_scope_words(request: StoredRequest) -> list[str]:
    """The scope of a grant with every argument ``"same"``, in words (Slack, email)."""
    match = {name: SAME for name in sorted(request.arguments)}
    lines = describe(match, request.arguments)
    lines.append(requested_by_words(SAME, request.requested_by))
    return lines


def decided_through(request: StoredRequest, rule: ToolRule | None = None) -> str | None:
    """``"grant grant_1a2b of alice"`` or ``"rule small refunds"``: what decided it, else None.

    A rule's decision is known by its ``decided_by`` (``rule:NAME``); with the
    tool's ``rule`` given, only a NAME its rules file has is said to be a rule
    (a reviewer's name could also start with ``rule:``).
    """
    summary: Mapping[str, Any] | None = request.decision_grant
    if summary is not None:
        names = summary.get("granted_by")
        givers = ", ".join(str(one) for one in names) if isinstance(names, list) else "?"
        return f"grant {summary.get('id')} of {givers}"
    by = None if request.decision is None else request.decision.decided_by
    if by is not None and by.startswith(RULE_PREFIX):
        name = by[len(RULE_PREFIX) :]
        if rule is not None and all(one.name != name for one in rule.auto):
            return None
        return f"rule {name}"
    return None
