"""Fixtures for the Discord tests: a fake Discord, a provider posting to it, a team linked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import requests

from approval_guard.provider import PostgresStore, ProviderServer
from approval_guard.provider.channels.discord import DiscordSettings
from approval_guard.provider.channels.discord.channel import DiscordChannel
from tests.support import fake_discord
from tests.support.api import Api, wait_for
from tests.support.fake_discord import CHANNEL, TOKEN, FakeDiscord
from tests.support.fakes import ShiftedClock

RULES = """\
[tools.issue_refund]
approvers = ["payments"]
approvals_required = 2
self_approval = false

[tools.small_refund]
approvers = ["payments"]
self_approval = false

[tools.delete_user]
approvers = ["admin"]
"""

#: name -> (roles, Discord user id)
PEOPLE = {
    "alice": (["payments"], "80351110224678912"),
    "bob": (["payments"], "80351110224678913"),
    "carol": (["admin"], "80351110224678914"),
}


@attrs.define
class DiscordTeam:
    server: ProviderServer
    discord: FakeDiscord
    instance: Api
    tokens: dict[str, str]
    clock: ShiftedClock

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def endpoint(self) -> str:
        return f"{self.server.url}/discord/interactions"

    def user(self, name: str) -> str:
        return PEOPLE[name][1]

    def new(self, tool: str = "small_refund", **body: Any) -> dict[str, Any]:
        arguments = body.pop("arguments", {"payment_id": "payment_123", "amount": 4900})
        return self.instance.new(
            body={
                "tool": tool,
                "arguments": arguments,
                "timeout": body.pop("timeout", "30m"),
                **body,
            }
        )

    def posted(self) -> dict[str, Any]:
        """The one message, once Discord has it."""
        return self.discord.wait_message(lambda message: True)

    def interact(self, interaction: dict[str, Any], **options: Any) -> requests.Response:
        """Post ``interaction`` signed as Discord does, stamped with the provider's clock."""
        options.setdefault("timestamp", int(self.clock().timestamp()))
        return self.discord.post(self.endpoint, interaction, **options)

    def click(self, name_or_user: str, label: str) -> requests.Response:
        """A person (a name of PEOPLE, or a raw user id) clicks ``label`` on the message."""
        user = PEOPLE[name_or_user][1] if name_or_user in PEOPLE else name_or_user
        message = self.posted()
        return self.interact(fake_discord.click(user, message, fake_discord.button(message, label)))

    def get(self, request_id: str) -> dict[str, Any]:
        return self.instance.poll(request_id).json()

    def audit(self, request_id: str) -> list[dict[str, Any]]:
        answer = requests.get(
            f"{self.url}/v1/requests/{request_id}/history",
            headers={"Authorization": f"Bearer {self.tokens['carol']}"},
            timeout=10,
        )
        return list(answer.json()["audit"])

    def reviewer(self, name: str) -> Api:
        return Api(self.server.url, self.tokens[name])

    def wait_given_up(self, request_id: str) -> dict[str, Any]:
        """The request's ``discord.given_up`` audit row, once written."""
        rows = wait_for(
            lambda: [r for r in self.audit(request_id) if r["action"] == "discord.given_up"],
            timeout=15,
            what="no discord.given_up audit row",
        )
        return rows[0]

    def decisions(self, request_id: str) -> list[dict[str, Any]]:
        return [
            row
            for row in self.audit(request_id)
            if row["action"] in ("request.approval", "request.denial", "request.edit")
        ]


def discord_channel(discord: FakeDiscord, *, token: str = TOKEN) -> DiscordChannel:
    settings = DiscordSettings(
        bot_token=token, public_key=discord.public_key, channel=CHANNEL, api_url=discord.api_url
    )
    return DiscordChannel(settings)


def start(db: Any, channel: DiscordChannel, rules: Path, **options: Any) -> ProviderServer:
    options.setdefault("webhook_backoff", 0.05)  # the outbox's retries, short for the tests
    return ProviderServer(db, rules=rules, channels=[channel], **options).start()


def add_people(server: ProviderServer) -> dict[str, str]:
    tokens = {}
    for name, (roles, user) in PEOPLE.items():
        tokens[name] = server.store.add_reviewer(name, roles=roles)
        server.store.link_identity(name, "discord", user)
    return tokens


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(RULES)
    return path


@pytest.fixture
def provider_clock() -> ShiftedClock:
    """The provider's clock: a test moves it on past a deadline instead of sleeping."""
    return ShiftedClock()


#: PostgreSQL in the slow run (``.ci/run`` runs both): the default run stays near three minutes.
@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])]
)
def database(
    request: pytest.FixtureRequest, tmp_path: Path, provider_clock: ShiftedClock
) -> Iterator[Any]:
    """A SQLite file path, or an open PostgreSQL store on a schema of its own (on the clock)."""
    if request.param == "sqlite":
        yield str(tmp_path / "discord.sqlite3")
        return
    store = PostgresStore(request.getfixturevalue("pg_schema_dsn"), clock=provider_clock)
    try:
        yield store
    finally:
        store.close()


def make_team(
    database: Any, discord: FakeDiscord, rules_file: Path, clock: ShiftedClock, **options: Any
) -> DiscordTeam:
    server = start(database, discord_channel(discord), rules_file, clock=clock, **options)
    first = server.first_start_tokens
    assert first is not None
    tokens = add_people(server)
    return DiscordTeam(server, discord, Api(server.url, first.instance), tokens, clock)


@pytest.fixture
def team(
    database: Any, discord: FakeDiscord, rules_file: Path, provider_clock: ShiftedClock
) -> Iterator[DiscordTeam]:
    """A provider posting to the fake Discord; alice and bob (payments), carol (admin), linked."""
    made = make_team(database, discord, rules_file, provider_clock)
    try:
        yield made
    finally:
        made.server.close()
