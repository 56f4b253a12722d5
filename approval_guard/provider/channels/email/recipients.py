"""Who is mailed a tool's new request: the server's ``--email-to`` plus the rules' ``email_to``.

Each entry is an address or ``role:NAME`` (:mod:`.addresses`). A mail only
ever goes to a live named reviewer, with links bound to that reviewer: an
address entry mails the reviewer whose address it is (none: no mail, and a
warning), a role entry every reviewer with that role and an address. Of
those, only reviewers the tool's rule lets decide are mailed (``approvers``),
and each at most once per request, however many entries name them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from approval_guard.provider.channels.email.addresses import check_recipient, role_of
from approval_guard.provider.rules.config import NO_RULES, Rules


@attrs.frozen
class EmailRoutes:
    """The recipient entries of every tool, and of the tools the rules file names."""

    everywhere: tuple[str, ...] = ()
    rules: Rules = NO_RULES
    #: True when some tool's requests are mailed to someone (asked at every commit).
    active: bool = attrs.field(init=False, eq=False, repr=False)

    @active.default
    def _mails_anyone(self) -> bool:
        return bool(self.everywhere) or any(
            rule.email_to for rule in (self.rules.defaults, *self.rules.tools.values())
        )

    def for_tool(self, tool: str) -> tuple[str, ...]:
        """The entries a request of ``tool`` is mailed to, each once, in order."""
        return tuple(dict.fromkeys((*self.everywhere, *self.rules.for_tool(tool).email_to)))


#: Nobody is mailed.
NO_EMAIL = EmailRoutes()


def email_routes(everywhere: Sequence[str], rules: Rules = NO_RULES) -> EmailRoutes:
    """The routes for the server's entries and the rules file's (``AddressError``: a bad one)."""
    return EmailRoutes(everywhere=tuple(check_recipient(one) for one in everywhere), rules=rules)


@attrs.frozen
class Reviewer:
    """A live named reviewer who has an address: who a mail may go to."""

    id: str
    name: str
    roles: tuple[str, ...]
    address: str


def recipients(
    entries: Iterable[str], reviewers: Sequence[Reviewer], approvers: tuple[str, ...] | None
) -> tuple[list[Reviewer], list[str]]:
    """``(reviewers to mail, address entries that name no reviewer)``, each reviewer once.

    ``approvers`` is the tool's rule's (None: every reviewer may decide).
    """
    by_address: Mapping[str, Reviewer] = {one.address: one for one in reviewers}
    chosen: dict[str, Reviewer] = {}
    unknown: list[str] = []
    for entry in entries:
        role = role_of(entry)
        if role is None:
            found = by_address.get(entry)
            if found is None:
                unknown.append(entry)
            else:
                chosen.setdefault(found.id, found)
            continue
        for one in reviewers:
            if role in one.roles:
                chosen.setdefault(one.id, one)
    allowed = [
        one for one in chosen.values() if approvers is None or set(approvers) & set(one.roles)
    ]
    return allowed, unknown
