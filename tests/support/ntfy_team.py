"""A provider pushing to its reviewers' ntfy topics: a store, reviewers with topics, a fake ntfy."""

from __future__ import annotations

from datetime import timedelta

import attrs

from approval_guard.provider import ProviderServer, StoreProtocol
from approval_guard.provider.channels.ntfy.channel import NtfyChannel
from approval_guard.provider.channels.ntfy.settings import make_settings
from approval_guard.provider.rules.config import parse_rules
from tests.support.api import REFUND, Api
from tests.support.cli import free_port
from tests.support.fake_ntfy import TOKEN, FakeNtfy, Publish
from tests.support.mail_team import Clock

#: issue_refund: payments, not by who asked; big_refund: two of payments.
RULES = """\
[tools.issue_refund]
approvers = ["payments"]
self_approval = false

[tools.big_refund]
approvers = ["payments"]
approvals_required = 2
"""

#: name -> (roles, topic or None)
PEOPLE = {
    "alice": (["payments"], "alice-Zq3xW8rT5yU2"),
    "bob": (["payments"], "bob-Kp9mN4vB7cX1"),
    "carol": (["ops"], "carol-Lr6tY3uI8oP0"),
    "dave": (["payments"], None),
}


def topic(name: str) -> str:
    found = PEOPLE[name][1]
    assert found is not None
    return found


@attrs.define
class NtfyTeam:
    """A running provider with an ntfy channel, its store, clock, tokens and the fake ntfy."""

    server: ProviderServer
    store: StoreProtocol
    ntfy: FakeNtfy
    clock: Clock
    tokens: dict[str, str]

    @property
    def instance(self) -> Api:
        return Api(self.server.url, self.tokens["instance"])

    def new(self, tool: str = "issue_refund", **fields: object) -> str:
        """A new pending request's id (the instance asks; ``fields`` join the create's body)."""
        body = {"tool": tool, "arguments": REFUND, "timeout": "30m", **fields}
        return str(self.instance.new(body=body)["id"])

    def published(self, request_id: str, name: str) -> Publish:
        """The new-request notification for ``request_id`` on ``name``'s topic, once it came."""
        found: list[Publish] = []

        def arrived(fake: FakeNtfy) -> bool:
            found[:] = [
                one
                for one in fake.accepted(topic(name))
                if one.body.get("actions") and f"request {request_id}" in one.body["message"]
            ]
            return bool(found)

        assert self.ntfy.wait_for(arrived), self.ntfy.publishes
        return found[0]

    def decisions(self, request_id: str) -> list[tuple[str, dict[str, object]]]:
        """The decision audit rows of a request: ``(action, detail)``."""
        return [
            (row.action, row.detail)
            for row in self.store.audit(request_id=request_id)
            if row.action in ("request.approval", "request.denial", "request.edit")
        ]

    def later(self, seconds: float) -> None:
        """Move the provider's clock on."""
        self.clock.offset += timedelta(seconds=seconds)


def start_ntfy_team(
    store: StoreProtocol,
    ntfy: FakeNtfy,
    clock: Clock,
    *,
    token: str | None = TOKEN,
    port: int | None = None,
    public_url: str | None = None,
) -> NtfyTeam:
    """Reviewers with topics, and a provider publishing to ``ntfy`` with ``token``.

    The buttons post to ``public_url`` (else the provider's own address).
    """
    tokens: dict[str, str] = {}
    for name, (roles, where) in PEOPLE.items():
        tokens[name] = store.add_reviewer(name, roles=roles)
        if where is not None:
            store.link_identity(name, "ntfy", where)
    port = port or free_port()
    base = public_url or f"http://127.0.0.1:{port}"
    channel = NtfyChannel(make_settings(ntfy.url, token, base))
    server = ProviderServer(
        store,
        port=port,
        rules=parse_rules(RULES),
        channels=[channel],
        webhook_backoff=0.05,
    )
    first = server.first_start_tokens
    assert first is not None
    tokens["instance"] = first.instance
    server.start()
    return NtfyTeam(server=server, store=store, ntfy=ntfy, clock=clock, tokens=tokens)
