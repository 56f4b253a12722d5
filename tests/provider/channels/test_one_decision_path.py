"""One decision path: a rule added to ``channels.decisions.decide`` binds every channel.

The rule is added in-process (the provider runs in this process), and each
channel's decision over real HTTP is then refused by it: the API, the review
page (one decision and a batch), a Slack click and modal, an email
confirmation, and the testing reviewer. Nothing is recorded, and every
channel answers the refusal in its own words.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

from approval_guard.provider import ProviderServer, SlackSettings, Store
from approval_guard.provider.channels import decisions as channel_decisions
from approval_guard.provider.channels.email.settings import email_settings
from approval_guard.provider.rules.config import parse_rules
from approval_guard.provider.store.models import Forbidden
from approval_guard.testing import LocalProvider
from tests.support.api import Api, signed_in
from tests.support.fake_slack import SIGNING_SECRET, TOKEN, FakeSlack
from tests.support.mail_team import RULES, SENDER, page_text, post_decision, token_of
from tests.support.slack_clicks import CHANNEL, block_action, post, view_submission
from tests.support.smtp import Mailbox

WHY = "test rule"


@attrs.define
class Everywhere:
    """A provider on SQLite reaching alice (payments) by Slack and by email."""

    server: ProviderServer
    store: Store
    slack: FakeSlack
    mailbox: Mailbox
    instance: Api
    alice: str

    def new(self) -> str:
        """A new pending issue_refund request's id (the instance asks)."""
        return str(self.instance.new(tool="issue_refund")["id"])

    def recorded(self, request_id: str) -> list[str]:
        """The decision audit rows of a request (approvals, denials, edits, grants)."""
        return [
            row.action
            for row in self.store.audit(request_id=request_id)
            if row.action.startswith(("request.approval", "request.denial", "request.edit"))
            or row.action.startswith("grant.")
        ]

    def untouched(self, request_id: str) -> bool:
        """Still pending, no approval counted, no decision audited, no grant given."""
        polled = self.instance.poll(request_id).json()
        return (
            polled["status"] == "pending"
            and not polled.get("approvals")
            and not self.recorded(request_id)
            and not self.store.list_grants(include_ended=True)
        )

    def reply(self, n: int) -> str:
        """The ``n``-th reply only the clicking Slack user sees."""
        return str(self.slack.wait_calls("chat.postEphemeral", n)[n - 1].body["text"])

    def link(self, request_id: str) -> str:
        """The token of alice's approve link for ``request_id``, once her mail arrived."""
        mail = self.mailbox.wait_until(
            lambda one: (
                one.message["X-Approval-Guard-Request"] == request_id
                and "alice@example.com" in one.rcpt_tos
            )
        )
        return token_of(mail.links()["approve"])


@pytest.fixture
def everywhere(tmp_path: Path) -> Iterator[Everywhere]:
    """The provider with Slack (a fake Slack API) and email (a real SMTP server on 127.0.0.1)."""
    mailbox = Mailbox().start()
    store = Store(str(tmp_path / "channels.sqlite3"))
    try:
        alice = store.add_reviewer("alice", roles=["payments"])
        store.link_identities("alice", {"email": "alice@example.com", "slack": "U0ALICE"})
        with FakeSlack() as slack:
            settings = SlackSettings(
                bot_token=TOKEN,
                signing_secret=SIGNING_SECRET,
                channel=CHANNEL,
                api_url=slack.api_url,
            )
            server = ProviderServer(
                store,
                rules=parse_rules(RULES),
                slack=settings,
                email=email_settings(mailbox.url, SENDER, ("role:payments",), environ={}),
            )
            first = server.first_start_tokens
            assert first is not None
            with server:
                instance = Api(server.url, first.instance)
                yield Everywhere(server, store, slack, mailbox, instance, alice)
    finally:
        store.close()
        mailbox.close()


@pytest.fixture
def channels_seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A rule added to the one decision function: refuse every decision; the channels it saw."""
    seen: list[str] = []

    def ruled(*args: Any, **kwargs: Any) -> Any:
        seen.append(str(kwargs["channel"]))
        raise Forbidden(WHY)

    monkeypatch.setattr(channel_decisions, "decide", ruled)
    return seen


def test_a_rule_in_the_one_decision_function_binds_the_api_and_the_page(
    everywhere: Everywhere, channels_seen: list[str]
) -> None:
    """API (with and without a grant), the page's decision and its batch: 403, nothing recorded."""
    api = Api(everywhere.server.url, everywhere.alice)
    one, granting, paged, batched = (everywhere.new() for _ in range(4))
    refused = api.decide(one, {"status": "approved"})
    assert (403, "forbidden", WHY) == (
        refused.status_code,
        refused.json()["error"]["type"],
        refused.json()["error"]["message"],
    )
    with_grant = api.decide(granting, {"status": "approved", "grant": {"for": "30m"}})
    assert (403, WHY) == (with_grant.status_code, with_grant.json()["error"]["message"])
    session, csrf = signed_in(SimpleNamespace(url=api.url, reviewer_credential=everywhere.alice))
    page = session.post(
        f"{api.url}/v1/requests/{paged}/decision",
        json={"status": "denied", "note": "from the page"},
        headers={"X-CSRF-Token": csrf},
        timeout=10,
    )
    assert (403, "forbidden") == (page.status_code, page.json()["error"]["type"])
    batch = session.post(
        f"{api.url}/v1/decisions",
        json={"ids": [batched], "status": "approved"},
        headers={"X-CSRF-Token": csrf},
        timeout=10,
    )
    assert 200 == batch.status_code, batch.text
    assert [{"id": batched, "error": {"type": "forbidden", "message": WHY}}] == batch.json()[
        "results"
    ]
    assert ["api", "api", "api", "page"] == channels_seen
    assert all(everywhere.untouched(one) for one in (one, granting, paged, batched))


def test_a_rule_in_the_one_decision_function_binds_slack(
    everywhere: Everywhere, channels_seen: list[str]
) -> None:
    """A Slack click and the grant modal are refused with the rule's words; nothing recorded."""
    clicked, granted = everywhere.new(), everywhere.new()
    url = everywhere.server.url
    assert 200 == post(url, block_action("U0ALICE", "ag_approve", clicked)).status_code
    assert f"Not recorded: {WHY}." == everywhere.reply(1)
    post(url, block_action("U0ALICE", "ag_grant", granted))
    view = everywhere.slack.wait_calls("views.open")[0].body["view"]
    payload: dict[str, Any] = view_submission("U0ALICE", view, {"uses": "", "note": ""})
    payload["view"]["state"]["values"]["for"] = {
        "for": {"type": "static_select", "selected_option": {"value": "30m"}}
    }
    assert 200 == post(url, payload).status_code
    assert f"Not recorded: {WHY}." == everywhere.reply(2)
    assert ["slack", "slack"] == channels_seen
    assert everywhere.untouched(clicked) and everywhere.untouched(granted)


def test_a_rule_in_the_one_decision_function_binds_email(
    everywhere: Everywhere, channels_seen: list[str]
) -> None:
    """The email confirmation's POST (plain, with a grant): a 403 page saying why, nothing kept."""
    plain, granting = everywhere.new(), everywhere.new()
    url = everywhere.server.url
    refused = post_decision(url, plain, everywhere.link(plain))
    assert 403 == refused.status_code
    assert WHY in page_text(refused)
    with_grant = post_decision(
        url, granting, everywhere.link(granting), grant_for="30m", grant_uses=""
    )
    assert 403 == with_grant.status_code
    assert WHY in page_text(with_grant)
    assert ["email", "email"] == channels_seen
    assert everywhere.untouched(plain) and everywhere.untouched(granting)


def test_a_rule_in_the_one_decision_function_binds_the_testing_reviewer(
    provider: LocalProvider, api: Api, channels_seen: list[str]
) -> None:
    """LocalProvider.approve and .deny raise the rule's refusal and record nothing."""
    made = api.new()
    with pytest.raises(Forbidden, match=WHY):
        provider.approve(made["id"])
    with pytest.raises(Forbidden, match=WHY):
        provider.deny(made["id"], "no")
    assert ["api", "api"] == channels_seen
    assert "pending" == api.poll(made["id"]).json()["status"]
