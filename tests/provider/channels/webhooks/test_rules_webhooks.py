"""Team rules and webhooks together, over real HTTP on 127.0.0.1 with a real receiver.

A rules file's per-tool webhooks, the Slack "who must approve" from the rule,
webhook deliveries in the audit trail, the team fields in the standard payload,
and the CLI's wording for the new refusals.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from approval_guard.cli import main
from approval_guard.provider import ProviderServer, WebhookTarget
from approval_guard.provider.channels.webhooks.signing import (
    WebhookSignatureError,
    display_url,
    new_secret,
    verify,
)
from approval_guard.provider.rules.config import RulesError, parse_rules
from tests.support.api import REFUND, Api, eventually
from tests.support.webhook_receiver import Receiver

SECRET = "whsec_" + base64.b64encode(b"wiring-secret-key-0123456789").decode()
MARKER = {"$redacted": "0123456789ab"}


def _rules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return path


def _serve(db: Path, rules: Path | None, *targets: WebhookTarget, **options: Any) -> ProviderServer:
    options.setdefault("webhook_backoff", 0.05)
    return ProviderServer(str(db), rules=rules, webhooks=targets, **options)


def _instance(server: ProviderServer) -> Api:
    tokens = server.first_start_tokens
    assert tokens is not None
    return Api(server.url, tokens.instance)


def _create(api: Api, tool: str, **extra: Any) -> dict[str, Any]:
    return api.new(body={"tool": tool, "arguments": REFUND, "timeout": "30m", **extra})


def _settled(store: Any, timeout: float = 20.0) -> list[Any]:
    """The outbox once no row is pending."""
    assert eventually(
        lambda: all(
            item.state != "pending" for item in store.list_outbox(channels=("webhooks", "slack"))
        ),
        timeout,
    )
    return list(store.list_outbox(channels=("webhooks", "slack")))


# ------------------------------------------------------------------ per-tool webhooks


def test_a_rules_file_webhook_hears_only_its_tools_events_signed(
    tmp_path: Path, receiver: Receiver
) -> None:
    """[tools.issue_refund] webhooks: its events arrive signed; another tool's are never queued."""
    rules = _rules(
        tmp_path,
        f'[tools.issue_refund]\nwebhooks = [{{url = "{receiver.url}", secret = "{SECRET}"}}]\n',
    )
    with _serve(tmp_path / "a.db", rules) as server:
        api = _instance(server)
        other = _create(api, "send_email")
        refund = _create(api, "issue_refund")
        api.cancel(other["id"]).raise_for_status()
        api.cancel(refund["id"]).raise_for_status()
        got = receiver.wait_count(2)
        items = _settled(server.store)

    assert {refund["id"]} == {item.request_id for item in items}
    assert ["request.created", "request.cancelled"] == [d.json["type"] for d in got]
    assert {refund["id"]} == {d.json["data"]["id"] for d in got}
    for delivery in got:
        verify(SECRET, delivery.headers, delivery.body)
        with pytest.raises(WebhookSignatureError):
            verify(new_secret(), delivery.headers, delivery.body)
    assert {"delivered"} == {item.state for item in items}


def test_a_server_webhook_hears_every_tool_beside_a_rules_one(tmp_path: Path) -> None:
    """``--webhook`` gets both tools' events; the rules file's target only its tool's."""
    with Receiver() as everything, Receiver() as refunds:
        rules = _rules(tmp_path, f'[tools.issue_refund]\nwebhooks = [{{url = "{refunds.url}"}}]\n')
        with _serve(tmp_path / "a.db", rules, WebhookTarget(everything.url)) as server:
            api = _instance(server)
            email = _create(api, "send_email")
            refund = _create(api, "issue_refund")
            everything.wait_count(2)
            refunds.wait_count(1)
            _settled(server.store)
        assert {email["id"], refund["id"]} == {d.json["data"]["id"] for d in everything.ok()}
        assert [refund["id"]] == [d.json["data"]["id"] for d in refunds.ok()]
        assert "webhook-signature" not in refunds.deliveries[0].headers  # no secret: unsigned


def test_defaults_webhooks_reach_every_tool_without_its_own_list(tmp_path: Path) -> None:
    """[defaults] webhooks: any tool's events, except a tool whose table lists its own."""
    with Receiver() as general, Receiver() as special:
        rules = _rules(
            tmp_path,
            f'[defaults]\nwebhooks = [{{url = "{general.url}"}}]\n\n'
            f'[tools.delete_user]\nwebhooks = [{{url = "{special.url}"}}]\n',
        )
        with _serve(tmp_path / "a.db", rules) as server:
            api = _instance(server)
            email = _create(api, "send_email")
            delete = _create(api, "delete_user")
            general.wait_count(1)
            special.wait_count(1)
            _settled(server.store)
            rows = {
                (item.request_id, item.target)
                for item in server.store.list_outbox(channels=("webhooks", "slack"))
            }
    assert {(email["id"], general.url), (delete["id"], special.url)} == rows


def test_rules_file_webhook_rows_survive_a_restart(tmp_path: Path, receiver: Receiver) -> None:
    """An event queued for a rules-file target is delivered by the next start on the file."""
    rules = _rules(
        tmp_path,
        f'[tools.issue_refund]\nwebhooks = [{{url = "{receiver.url}", secret = "{SECRET}"}}]\n',
    )
    db = tmp_path / "a.db"
    first = _serve(db, rules)
    tokens = first.first_start_tokens
    assert tokens is not None
    # Queued by a server that never serves (so never delivers): only the outbox holds it.
    instance = next(c for c in first.store.list_credentials() if c.kind == "instance")
    made = first.store.create_request(
        owner=instance,
        idempotency_key="k1",
        tool="issue_refund",
        arguments=REFUND,
        timeout_seconds=1800,
    )
    first.close()
    assert [] == receiver.deliveries
    with _serve(db, rules) as second:
        (delivery,) = receiver.wait_count(1)
        _settled(second.store)
    verify(SECRET, delivery.headers, delivery.body)
    assert made.request.id == delivery.json["data"]["id"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            '[tools.a]\nwebhooks = [{url = "https://h.example/x", secret = "whsec_leak"}]\n',
            "secret",
        ),
        (
            '[tools.a]\nwebhooks = [{url = "https://h.example/x", secret = "sk_leakleakleak"}]\n',
            "secret",
        ),
        (
            '[tools.a]\nwebhooks = [{url = "https://h.example/x"}]\n'
            '[tools.b]\nwebhooks = [{url = "https://h.example/x", format = "slack"}]\n',
            "another secret or format",
        ),
        (
            '[tools.a]\nwebhooks = [{url = "https://h.example/x"}, {url = "https://h.example/x"}]\n',
            "twice",
        ),
    ],
)
def test_a_bad_rules_file_webhook_stops_the_start_naming_the_line(text: str, words: str) -> None:
    """A secret that is not whsec_ + base64, or one URL with two settings: file:line, no secret."""
    with pytest.raises(RulesError) as caught:
        parse_rules(text, "rules.toml")
    message = str(caught.value)
    assert message.startswith("rules.toml:"), message
    assert words in message
    assert "leak" not in message


def test_serve_refuses_a_rules_webhook_given_otherwise_with_webhook(tmp_path: Path) -> None:
    """One URL from ``--webhook`` and the rules file with another secret: ValueError, no secret."""
    url = "http://127.0.0.1:9/hook"
    rules = _rules(tmp_path, f'[tools.a]\nwebhooks = [{{url = "{url}", secret = "{SECRET}"}}]\n')
    with pytest.raises(ValueError) as caught:
        _serve(tmp_path / "a.db", rules, WebhookTarget(url))
    assert SECRET[6:] not in str(caught.value)
    assert "another secret or format" in str(caught.value)


# ------------------------------------------------------------------ slack and payloads

TEAM_RULES = """\
[tools.issue_refund]
approvers = ["payments"]
approvals_required = 2
self_approval = false
"""


def _team(server: ProviderServer) -> dict[str, Api]:
    store = server.store
    out = {"instance": _instance(server)}
    for name, roles in (("alice", ["payments"]), ("bob", ["payments"]), ("dave", [])):
        out[name] = Api(server.url, store.add_reviewer(name, roles=roles))
    return out


def test_slack_says_who_must_approve_from_the_rule(tmp_path: Path, receiver: Receiver) -> None:
    """``--rules`` with ``--webhook-format slack``: "2 approvals from: payments"; others any."""
    rules = _rules(tmp_path, TEAM_RULES)
    slack = WebhookTarget(receiver.url, None, "slack")
    with _serve(tmp_path / "a.db", rules, slack) as server:
        api = _instance(server)
        _create(api, "issue_refund")
        _create(api, "send_email")
        got = receiver.wait_count(2)
    # Deliveries go out concurrently: they may arrive in either order.
    [refund] = [d for d in got if "issue_refund" in d.json["text"]]
    [email] = [d for d in got if "send_email" in d.json["text"]]
    assert "2 approvals from: payments" in refund.json["text"]
    assert "2 approvals from: payments" in json.dumps(refund.json["blocks"])
    assert "any reviewer may approve" in email.json["text"]


def test_the_standard_payload_carries_the_team_fields_and_keeps_markers(
    tmp_path: Path, receiver: Receiver
) -> None:
    """decided_by names both approvers; approvals, approvals_required, requested_by; no token."""
    rules = _rules(tmp_path, TEAM_RULES)
    with _serve(tmp_path / "a.db", rules, WebhookTarget(receiver.url, None)) as server:
        team = _team(server)
        arguments = {**REFUND, "card": MARKER}
        created = team["instance"].new(
            body={
                "tool": "issue_refund",
                "arguments": arguments,
                "timeout": "30m",
                "requested_by": "erin",
            }
        )
        team["alice"].decide(created["id"], {"status": "approved"}).raise_for_status()
        team["bob"].decide(created["id"], {"status": "approved"}).raise_for_status()
        got = receiver.wait_count(2)
        secrets_ = [team[name].token for name in team] + [
            c.id for c in server.store.list_credentials()
        ]
        _settled(server.store)
        outbox = server.store.list_outbox(channels=("webhooks", "slack"))

    # One approval of two queues nothing: created, then the one decision.
    assert 2 == len(outbox)
    # Delivered concurrently, in either order.
    order = ["request.created", "request.decided"]
    first, decided = sorted((d.json for d in got), key=lambda event: order.index(event["type"]))
    assert order == [first["type"], decided["type"]]
    assert ("erin", 2, []) == (
        first["data"]["requested_by"],
        first["data"]["approvals_required"],
        first["data"]["approvals"],
    )
    data = decided["data"]
    assert "alice, bob" == data["decision"]["decided_by"]
    assert ["alice", "bob"] == [one["by"] for one in data["approvals"]]
    assert all(isinstance(one["at"], str) for one in data["approvals"])
    assert (2, "erin") == (data["approvals_required"], data["requested_by"])
    assert arguments == data["arguments"]  # the marker exactly as stored
    for delivery in got:
        text = delivery.body.decode()
        assert not [s for s in secrets_ if s and s in text]


# ------------------------------------------------------------------ audit


def test_a_delivery_is_in_the_audit_trail_without_the_query(tmp_path: Path) -> None:
    """webhook.delivered by system via webhook: url without the query, attempts, event type."""
    with Receiver(statuses=[500]) as hook:
        url = hook.url + "?token=hook-query-secret"
        with _serve(tmp_path / "a.db", None, WebhookTarget(url)) as server:
            api = _instance(server)
            created = _create(api, "send_email")
            hook.wait_count(2)
            _settled(server.store)
            assert eventually(
                lambda: any(
                    row.action == "webhook.delivered"
                    for row in server.store.audit(request_id=created["id"])
                )
            )
            rows = server.store.audit(request_id=created["id"])
            tokens = server.first_start_tokens
            assert tokens is not None
            reviewer = Api(server.url, tokens.reviewer)
            history = reviewer.get(f"/v1/requests/{created['id']}/history").json()
    (row,) = [r for r in rows if r.action.startswith("webhook.")]
    assert ("webhook.delivered", "system", "webhook") == (row.action, row.actor, row.source)
    assert (display_url(url), 2, "request.created") == (
        row.detail["url"],
        row.detail["attempts"],
        row.detail["event"],
    )
    assert "hook-query-secret" not in json.dumps(row.detail)
    shown = [a for a in history["audit"] if a["action"] == "webhook.delivered"]
    assert 1 == len(shown) and "hook-query-secret" not in json.dumps(history)


def test_a_given_up_delivery_is_in_the_audit_trail(tmp_path: Path) -> None:
    """An endpoint that never answers 2xx: webhook.given_up, by system, with its attempts."""
    with Receiver(statuses=[503] * 100) as hook:
        target = WebhookTarget(hook.url)
        with _serve(
            tmp_path / "a.db", None, target, webhook_backoff=0.05, webhook_give_up_after=0.3
        ) as server:
            created = _create(_instance(server), "send_email")
            assert eventually(
                lambda: any(
                    row.action == "webhook.given_up"
                    for row in server.store.audit(request_id=created["id"])
                ),
                20,
            )
            rows = server.store.audit(request_id=created["id"])
    (row,) = [r for r in rows if r.action.startswith("webhook.")]
    assert ("system", "webhook") == (row.actor, row.source)
    assert row.detail["attempts"] >= 1 and "HTTP 503" == row.detail["result"]
    assert "request.created" == row.detail["event"]


# ------------------------------------------------------------------ the CLI


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_approve_shows_progress_refusals_and_the_deciders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "1 of 2 approvals", 409 already approved, 403 forbidden with why; show names them all."""
    rules = _rules(tmp_path, TEAM_RULES)
    with _serve(tmp_path / "a.db", rules) as server:
        team = _team(server)
        created = _create(team["instance"], "issue_refund", requested_by="erin")
        request_id = created["id"]

        def approve(name: str) -> tuple[int, str, str]:
            token = team[name].token
            assert token is not None
            return _cli(capsys, "approve", request_id, "--url", server.url, "--token", token)

        code, out, err = approve("alice")
        assert (0, "") == (code, err)
        assert "1 of 2 approvals: alice" in out and "1 more person approves" in out
        assert not out.startswith("approved")

        code, out, err = approve("alice")
        assert 1 == code and "" == out
        assert "you already approved" in err and "it needs 2 approvals" in err
        assert "1 of 2 approvals: alice" in err

        code, out, err = approve("dave")
        assert 1 == code and "" == out
        assert "you may not decide this request: " in err and "payments" in err
        assert "403" in err

        bob = team["bob"].token
        assert bob is not None
        code, out, err = _cli(capsys, "show", request_id, "--url", server.url, "--token", bob)
        assert 0 == code
        assert "1 of 2 approvals: alice" in out and "erin" in out

        code, out, err = _cli(capsys, "list", "--json", "--url", server.url, "--token", bob)
        (listed,) = json.loads(out)
        assert (["alice"], 2, "erin") == (
            listed["approved_by"],
            listed["approvals_required"],
            listed["requested_by"],
        )

        code, out, err = approve("bob")
        assert (0, "") == (code, err)
        assert out.startswith(f"approved {request_id}") and "by alice, bob" in out

        code, out, err = _cli(capsys, "show", request_id, "--url", server.url, "--token", bob)
        assert 0 == code
        lines = {line.split("  ", 1)[0].strip(): line for line in out.splitlines()}
        assert "alice, bob" in lines["decided by"]
        assert "2 of 2 approvals: alice, bob" in lines["approvals"]
        for name in team:
            token = team[name].token
            assert token is None or token not in out + err


# ------------------------------------------------------------------ PostgreSQL


@pytest.mark.postgres
def test_on_postgresql_a_rules_webhook_hears_its_tool_and_is_audited(
    tmp_path: Path, pg_schema_dsn: str, receiver: Receiver
) -> None:
    """The same routing and audit rows on the PostgreSQL store, over real HTTP."""
    from approval_guard.provider import PostgresStore

    rules = parse_rules(
        f'[tools.issue_refund]\nwebhooks = [{{url = "{receiver.url}", secret = "{SECRET}"}}]\n'
    )
    store = PostgresStore(pg_schema_dsn)
    try:
        with ProviderServer(store, rules=rules, webhook_backoff=0.05) as server:
            api = _instance(server)
            other = _create(api, "send_email")
            refund = _create(api, "issue_refund")
            (delivery,) = receiver.wait_count(1)
            _settled(store)
            assert eventually(
                lambda: any(
                    row.action == "webhook.delivered"
                    for row in store.audit(request_id=refund["id"])
                )
            )
            routed = {item.request_id for item in store.list_outbox(channels=("webhooks", "slack"))}
            audited = [row for row in store.audit() if row.action.startswith("webhook.")]
    finally:
        store.close()
    verify(SECRET, delivery.headers, delivery.body)
    assert {refund["id"]} == routed and other["id"] not in routed
    assert [("system", "webhook", refund["id"])] == [
        (row.actor, row.source, row.request_id) for row in audited
    ]


def test_a_webhook_urls_path_is_never_shown() -> None:
    """A Slack incoming webhook's path is its secret: listings show host, first segment, digest."""
    url = "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX"
    shown = display_url(url)
    assert "XXXXsecretXXXX" not in shown and "T000" not in shown
    assert shown.startswith("https://hooks.slack.com/services/")
    assert display_url(url + "x") != shown  # two targets on one host still tell apart
    assert "pw" not in display_url("https://user:pw@example.com/hook")
    assert "https://example.com/hook" == display_url("https://example.com/hook")
