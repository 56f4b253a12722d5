"""Fixtures for the Slack tests: a fake Slack Web API, and a provider with a Slack app, a team."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import requests

from approval_guard.provider import PostgresStore, ProviderServer, SlackSettings
from tests.support.api import Api
from tests.support.fake_slack import SIGNING_SECRET, TOKEN, FakeSlack
from tests.support.fakes import ShiftedClock
from tests.support.slack_clicks import CHANNEL

RULES = """\
[tools.issue_refund]
approvers = ["payments"]
approvals_required = 2
self_approval = false
max_valid_for = "15m"

[tools.small_refund]
approvers = ["payments"]
self_approval = false
max_valid_for = "2m"

[tools.delete_user]
approvers = ["admin"]
"""

#: name -> (roles, Slack user id)
PEOPLE = {
    "alice": (["payments"], "U0ALICE"),
    "bob": (["payments"], "U0BOB"),
    "carol": (["admin"], "U0CAROL"),
}


@attrs.define
class SlackTeam:
    server: ProviderServer
    slack: FakeSlack
    instance: Api
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return self.server.url

    def reviewer(self, name: str) -> Api:
        return Api(self.server.url, self.tokens[name])

    def new(self, tool: str = "small_refund", **body: Any) -> dict[str, Any]:
        arguments = body.pop("arguments", {"payment_id": "payment_123", "amount": 4900})
        made = self.instance.new(
            body={
                "tool": tool,
                "arguments": arguments,
                "timeout": body.pop("timeout", "30m"),
                **body,
            }
        )
        return made

    def get(self, request_id: str) -> dict[str, Any]:
        return self.instance.poll(request_id).json()

    def audit(self, request_id: str) -> list[dict[str, Any]]:
        """The request's audit rows, as the history endpoint shows them (carol may read it)."""
        answer = requests.get(
            f"{self.url}/v1/requests/{request_id}/history",
            headers={"Authorization": f"Bearer {self.tokens['carol']}"},
            timeout=10,
        )
        return list(answer.json()["audit"])

    def decisions(self, request_id: str) -> list[dict[str, Any]]:
        """The audit rows of approvals, denials and edits of one request."""
        return [
            row
            for row in self.audit(request_id)
            if row["action"] in ("request.approval", "request.denial", "request.edit")
        ]


def slack_settings(slack: FakeSlack, channel: str | None = CHANNEL) -> SlackSettings:
    return SlackSettings(
        bot_token=TOKEN, signing_secret=SIGNING_SECRET, channel=channel, api_url=slack.api_url
    )


def start(db: Any, slack: FakeSlack, rules: Path, **options: Any) -> ProviderServer:
    server = ProviderServer(
        db, rules=rules, slack=slack_settings(slack), webhook_backoff=0.05, **options
    )
    return server.start()


def add_people(server: ProviderServer) -> dict[str, str]:
    tokens = {}
    for name, (roles, user) in PEOPLE.items():
        tokens[name] = server.store.add_reviewer(name, roles=roles)
        server.store.link_identity(name, "slack", user)
    return tokens


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    with FakeSlack() as slack:
        yield slack


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(RULES)
    return path


@pytest.fixture
def provider_clock() -> ShiftedClock:
    """The provider's clock: a test moves it on past a deadline instead of sleeping."""
    return ShiftedClock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(
    request: pytest.FixtureRequest, tmp_path: Path, provider_clock: ShiftedClock
) -> Iterator[Any]:
    """A SQLite file path, or an open PostgreSQL store on a schema of its own (on the clock)."""
    if request.param == "sqlite":
        yield str(tmp_path / "slack.sqlite3")
        return
    store = PostgresStore(request.getfixturevalue("pg_schema_dsn"), clock=provider_clock)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def team(
    database: Any, fake_slack: FakeSlack, rules_file: Path, provider_clock: ShiftedClock
) -> Iterator[SlackTeam]:
    """A provider posting to the fake Slack; alice and bob (payments), carol (admin), linked."""
    server = start(database, fake_slack, rules_file, clock=provider_clock)
    try:
        first = server.first_start_tokens
        assert first is not None
        tokens = add_people(server)
        yield SlackTeam(server, fake_slack, Api(server.url, first.instance), tokens)
    finally:
        server.close()
