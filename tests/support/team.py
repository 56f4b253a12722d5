"""Shared pieces of the team tests: a provider with a rules file and named reviewers."""

from __future__ import annotations

from pathlib import Path

import attrs

from approval_guard.provider import ProviderServer
from tests.support.api import Api

RULES = """\
[tools.issue_refund]
approvers = ["payments"]
approvals_required = 2
self_approval = false
max_valid_for = "15m"

[tools.delete_user]
approvers = ["admin"]
self_approval = false
"""


@attrs.define
class Team:
    server: ProviderServer
    instance: Api
    tokens: dict[str, str]

    def reviewer(self, name: str) -> Api:
        return Api(self.server.url, self.tokens[name])


def start_team(db: str | ProviderServer, rules: str | Path | None) -> Team:
    server = db if isinstance(db, ProviderServer) else ProviderServer(db, rules=rules)
    server.start()
    tokens = server.first_start_tokens
    assert tokens is not None
    team = Team(server=server, instance=Api(server.url, tokens.instance), tokens={})
    return team
