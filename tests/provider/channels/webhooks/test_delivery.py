"""Outgoing webhooks over real HTTP: a provider on 127.0.0.1 posts to a real receiver there."""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import approval_guard as ag
from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.channels.webhooks.channel import WebhooksChannel
from approval_guard.provider.channels.webhooks.payloads import slack_payload
from approval_guard.provider.channels.webhooks.settings import webhook_settings
from approval_guard.provider.channels.webhooks.signing import (
    WebhookSignatureError,
    WebhookTarget,
    display_url,
    new_secret,
    parse_secret,
    verify,
)
from approval_guard.provider.store.protocol import StoreProtocol
from tests.support.api import Api, sign_in, wait_for
from tests.support.databases import SharedDatabase
from tests.support.fleet import Fleet
from tests.support.guards import finish, in_thread
from tests.support.webhook_receiver import Delivery, Receiver

SECRET = new_secret()


def _serve(db: str | Path | Any, *targets: WebhookTarget, **options: Any) -> ProviderServer:
    options.setdefault("webhook_backoff", 0.05)
    return ProviderServer(str(db) if isinstance(db, Path) else db, webhooks=targets, **options)


def _channel(*targets: WebhookTarget) -> WebhooksChannel:
    """The webhooks channel a server with these targets sends through."""
    return WebhooksChannel(webhook_settings(targets, None, 5.0, 24 * 3600.0, None))


def _clients(server: ProviderServer) -> tuple[Api, Api]:
    tokens = server.first_start_tokens
    assert tokens is not None
    return Api(server.url, tokens.instance), Api(server.url, tokens.reviewer)


def _settled(store: Any, timeout: float = 20.0) -> list[Any]:
    """The outbox once no row is pending (a 200 is recorded just after it is answered)."""
    # Not met in time: the caller's assertions say what is still pending.
    with contextlib.suppress(AssertionError):
        wait_for(
            lambda: store.list_outbox(channels=("webhooks", "slack")),
            lambda items: all(item.state != "pending" for item in items),
            timeout=timeout,
        )
    return list(store.list_outbox(channels=("webhooks", "slack")))


def test_created_then_decided_arrive_signed_and_verify(tmp_path: Path, receiver: Receiver) -> None:
    """Both events reach a real receiver, in order, signed, with the request's state and link."""
    target = WebhookTarget(receiver.url, parse_secret(SECRET))
    with _serve(tmp_path / "a.db", target, public_url="https://review.example/") as server:
        api, reviewer = _clients(server)
        arguments = {"payment_id": "p_1", "amount": 4900, "token": {"$redacted": "0123456789ab"}}
        request = api.new(arguments=arguments, redacted=["/token"])
        first = receiver.wait_count(1)[0]
        reviewer.decide(request["id"], {"status": "approved", "note": "fine"}).raise_for_status()
        got = receiver.wait_count(2)

    assert ["request.created", "request.decided"] == [d.json["type"] for d in got]
    assert first.id != got[1].id and all(d.id.startswith("msg_") for d in got)
    for delivery in got:
        verify(SECRET, delivery.headers, delivery.body)
        with pytest.raises(WebhookSignatureError):
            verify(new_secret(), delivery.headers, delivery.body)
        with pytest.raises(WebhookSignatureError):
            verify(SECRET, delivery.headers, delivery.body.replace(b"4900", b"4901"))
        data = delivery.json["data"]
        assert request["id"] == data["id"]
        assert arguments == data["arguments"]  # the marker exactly as the adapter sent it
        assert ["/token"] == data["redacted"]  # API 1.3: which markers are redactions
        assert f"https://review.example/?request={request['id']}" == data["url"]
        assert request["deadline_at"] == data["deadline_at"]
    decision = got[1].json["data"]["decision"]
    assert ("approved", "fine", "reviewer") == (
        decision["status"],
        decision["note"],
        decision["decided_by"],
    )
    assert decision["expires_at"] is not None
    assert got[0].json["data"]["decision"] is None


def test_no_credential_or_token_is_ever_in_a_payload(tmp_path: Path, receiver: Receiver) -> None:
    """Neither token, the session, the credential ids nor the webhook key appear in a body."""
    key = parse_secret(SECRET)
    with _serve(tmp_path / "a.db", WebhookTarget(receiver.url, key)) as server:
        api, reviewer = _clients(server)
        request = api.new()
        reviewer.decide(request["id"], {"status": "denied", "note": "no"}).raise_for_status()
        other = api.new()
        api.cancel(other["id"]).raise_for_status()
        got = receiver.wait_count(4)
        tokens = server.first_start_tokens
        assert tokens is not None
        secrets_ = [tokens.instance, tokens.reviewer, SECRET, base64.b64encode(key).decode()]
        secrets_ += [c.id for c in server.store.list_credentials()]
    assert {"request.created", "request.decided", "request.cancelled"} == {
        d.json["type"] for d in got
    }
    for delivery in got:
        text = delivery.body.decode()
        assert not [s for s in secrets_ if s in text]
        assert not [s for s in secrets_ if s in json.dumps(delivery.headers)]


def test_a_receiver_failing_across_a_restart_still_gets_the_event(tmp_path: Path) -> None:
    """Five 500s, the provider stopped and a new one started on the file: delivered, same id."""
    db = tmp_path / "a.db"
    with Receiver(statuses=[500] * 5) as hook:
        target = WebhookTarget(hook.url, parse_secret(SECRET))
        first = _serve(db, target, webhook_backoff=0.2)
        first.start()
        api, _ = _clients(first)
        request = api.new()
        hook.wait_count(2)
        first.stop()  # as a kill would
        first.close()
        failed_before = len(hook.deliveries)
        assert failed_before < 6
        with _serve(db, target, webhook_backoff=0.05) as second:
            got = hook.wait_for(lambda got: any(d.status == 200 for d in got))
            (item,) = _settled(second.store)

    assert [500] * 5 + [200] == [d.status for d in got]
    assert {got[0].id} == {d.id for d in got}
    for delivery in got:
        verify(SECRET, delivery.headers, delivery.body)
        assert request["id"] == delivery.json["data"]["id"]
    assert ("delivered", "HTTP 200") == (item.state, item.last_result)
    # A post the kill cut before its answer was recorded is not an attempt on record.
    assert item.attempts in (5, 6) and item.attempts == len(item.history)
    assert [500] * (item.attempts - 1) + [200] == [a.status_code for a in item.history]
    assert all(a.next_attempt_at is not None for a in item.history[:-1])
    assert item.history[-1].next_attempt_at is None


def test_a_stop_while_a_webhook_is_in_flight_records_it_and_it_is_not_sent_again(
    tmp_path: Path,
) -> None:
    """The stop waits for the receiver's answer and settles the row: a restart sends nothing."""
    db = tmp_path / "a.db"
    with Receiver() as hook:
        hook.delay = 1.0  # the receiver takes a second to answer
        target = WebhookTarget(hook.url, parse_secret(SECRET))
        first = _serve(db, target)
        first.start()
        api, _ = _clients(first)
        api.new()
        assert hook.arrived.wait(10)  # the delivery is in flight, unanswered
        first.stop()
        first.close()
        assert 1 == len(hook.deliveries)
        hook.delay = 0.0
        with _serve(db, target) as second:
            # Settled is the signal: a row the stop left pending is sent again before that.
            (item,) = _settled(second.store)
            assert 1 == len(hook.deliveries)
    assert ("delivered", 1) == (item.state, item.attempts)


def test_an_unreachable_target_is_given_up_and_audited(tmp_path: Path) -> None:
    """Past the give-up window: given_up, with ``record_audit`` told when the store has it."""
    audited: list[tuple[Any, ...]] = []

    class AuditedStore(Store):
        def record_audit(self, *args: Any) -> None:
            audited.append(args)

    store = AuditedStore(str(tmp_path / "a.db"))
    with Receiver(statuses=[503] * 100) as hook:
        target = WebhookTarget(hook.url, None)
        with _serve(store, target, webhook_give_up_after=0.5) as server:
            api, _ = _clients(server)
            request = api.new()
            wait_for(lambda: audited, timeout=20, what="the give-up was never audited")
            (item,) = store.list_outbox(channels=("webhooks", "slack"))
    store.close()
    assert "given_up" == item.state and item.next_attempt_at is None
    assert item.attempts >= 2 and "HTTP 503" == item.last_result
    assert [("webhook.given_up", "system", "webhook", request["id"])] == [a[:4] for a in audited]
    assert {"url": display_url(hook.url), "attempts": item.attempts} == {
        k: audited[0][4][k] for k in ("url", "attempts")
    }
    assert "webhook-signature" not in hook.deliveries[0].headers  # no secret: unsigned


def test_a_hanging_receiver_never_holds_up_a_request_or_a_decision(tmp_path: Path) -> None:
    """While every delivery hangs, creates, decisions and polls answer as usual."""
    with Receiver() as hook:
        hook.hold = threading.Event()
        with _serve(tmp_path / "a.db", WebhookTarget(hook.url, None)) as server:
            api, reviewer = _clients(server)
            ids = [api.new()["id"] for _ in range(3)]
            for request_id in ids:
                answer = reviewer.decide(request_id, {"status": "approved"})
                assert 200 == answer.status_code
                assert "approved" == api.poll(request_id, timeout=5).json()["status"]
            assert [] == hook.deliveries
            hook.hold.set()
            got = hook.wait_count(6)
    assert 6 == len({d.id for d in got})


def test_expiry_and_cancel_are_events_and_a_lost_race_is_none(tmp_path: Path) -> None:
    """Expired and cancelled are queued once each; a second decision queues nothing."""
    now = [datetime(2026, 9, 16, 12, 0, tzinfo=timezone.utc)]
    store = Store(str(tmp_path / "a.db"), clock=lambda: now[0])
    store.set_channels(
        [_channel(WebhookTarget("http://127.0.0.1:9/a"), WebhookTarget("http://[::1]:9/b"))]
    )
    tokens = store.ensure_initial_credentials()
    assert tokens is not None
    owner, reviewer = store.authenticate(tokens.instance), store.authenticate(tokens.reviewer)
    assert owner is not None and reviewer is not None

    def new(key: str) -> str:
        made = store.create_request(
            owner=owner, idempotency_key=key, tool="t", arguments={}, timeout_seconds=60
        )
        return made.request.id

    expiring, cancelled, decided = new("1"), new("2"), new("3")
    store.cancel(cancelled, owner=owner)
    store.cancel(cancelled, owner=owner)  # again: unchanged, no event
    store.decide(decided, reviewer=reviewer, status="denied")
    with pytest.raises(ag.provider.NotPendingError):
        store.decide(decided, reviewer=reviewer, status="approved")
    now[0] += timedelta(minutes=2)
    store.expire_due()
    items = store.list_outbox(channels=("webhooks", "slack"))
    store.close()

    per_request: dict[str, list[str]] = {}
    for item in items:
        per_request.setdefault(item.request_id, []).append(item.event_type)
    assert sorted(["request.created"] * 2 + ["request.expired"] * 2) == sorted(
        per_request[expiring]
    )
    assert sorted(["request.created"] * 2 + ["request.cancelled"] * 2) == sorted(
        per_request[cancelled]
    )
    assert sorted(["request.created"] * 2 + ["request.decided"] * 2) == sorted(per_request[decided])
    expired = next(i for i in items if i.event_type == "request.expired")
    assert "2026-09-16T12:01:00Z" == expired.item.payload["timestamp"]  # dated at the deadline
    assert {"pending"} == {i.state for i in items}


def test_a_store_without_targets_queues_nothing(tmp_path: Path) -> None:
    """No webhooks configured: the outbox stays empty."""
    with ProviderServer(str(tmp_path / "a.db")) as server:
        api, _ = _clients(server)
        api.new()
        assert [] == server.store.list_outbox(channels=("webhooks", "slack"))


def test_the_slack_message_shows_markers_not_secrets_and_links_the_request(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A guarded call with a redacted key: the Slack text has the marker, the link, no secret.

    The guard lists the marker's place (API 1.3 ``redacted``): only so is it shown as one.
    """
    secret_value = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
    target = WebhookTarget(receiver.url, None, "slack")
    with _serve(tmp_path / "a.db", target, public_url="https://review.example") as server:
        tokens = server.first_start_tokens
        assert tokens is not None
        guard = ag.Guard(
            base_url=server.url, credential=tokens.instance, harness_limit="2m", poll_wait="5s"
        )

        @guard.requires_approval(timeout="30m", redact=("api_key",))
        def issue_refund(payment_id: str, note: str, api_key: str, *extra: int) -> str:
            return "ran"

        thread, box = in_thread(lambda: issue_refund("p_1", "x" * 500, secret_value, *range(30)))
        try:
            delivery = receiver.wait_count(1)[0]
            request_id = delivery.json["blocks"][-1]["elements"][0]["url"].split("=")[-1]
            Api(server.url, tokens.reviewer).decide(
                request_id, {"status": "denied", "note": "not now"}
            ).raise_for_status()
            out = finish(thread, box)
            decided = receiver.wait_count(2)[1]
        finally:
            guard.close()

    assert isinstance(out, ag.NotRun)
    body = delivery.body.decode()
    assert secret_value not in body
    message = delivery.json
    assert message["text"].startswith("Approval needed: issue_refund")
    assert "any reviewer" in message["text"] and "left" in message["text"]
    shown = message["blocks"][1]["text"]["text"]
    assert "*api_key*: `\u2039redacted " in shown
    assert "x" * 199 in shown and "x" * 200 not in shown  # cut to 200 characters
    assert shown.count("\n") + 1 <= 21
    link = f"https://review.example/?request={request_id}"
    assert link == message["blocks"][-1]["elements"][0]["url"]
    assert "not now" in json.dumps(decided.json) and "denied" in decided.json["text"]


def test_slack_names_the_approvers_and_escapes_markup() -> None:
    """``approvers`` replaces "any reviewer"; ``<``, ``>`` and ``&`` cannot make a link."""
    from approval_guard.provider.channels.webhooks.payloads import slack_payload

    now = datetime(2026, 9, 16, 12, 0, tzinfo=timezone.utc)
    event = {
        "type": "request.created",
        "timestamp": "2026-09-16T12:00:00Z",
        "data": {
            "id": "r1",
            "tool": "pay<https://evil.example|click>",
            "status": "pending",
            "arguments": {f"a{i}": i for i in range(25)},
            "deadline_at": "2026-09-16T12:30:00Z",
            "decision": None,
        },
    }
    message = slack_payload(event, public_url=None, now=now, approvers=["alice", "bob"])
    assert "alice, bob may approve" in message["text"] and "30m 00s left" in message["text"]
    assert (
        "<https" not in json.dumps(message)
        and "&lt;https://evil.example|click&gt;" in (message["text"])
    )
    shown = message["blocks"][1]["text"]["text"].splitlines()
    assert 21 == len(shown) and "\u2026 and 5 more" == shown[-1]
    assert "actions" not in [block["type"] for block in message["blocks"]]  # no public URL


def test_signing_in_from_a_request_link_keeps_the_request(tmp_path: Path) -> None:
    """``/?token=...&request=ID``'s button signs in to ``/?request=ID``, the token gone."""
    with ProviderServer(str(tmp_path / "a.db")) as server:
        tokens = server.first_start_tokens
        assert tokens is not None
        answer = sign_in(server.url, tokens.reviewer, request="a/b c")
    assert 303 == answer.status_code
    assert "./?request=a%2Fb%20c" == answer.headers["Location"]


def test_the_deliveries_are_the_same_bytes_the_signature_covers(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The signature covers the exact raw body; exact numbers stay exact in it."""
    target = WebhookTarget(receiver.url, parse_secret(SECRET))
    with _serve(tmp_path / "a.db", target) as server:
        api, _ = _clients(server)
        api.create(
            body={
                "tool": "t",
                "arguments": {"big": 9007199254740993},
                "timeout": "1m",
            }
        ).raise_for_status()
        delivery: Delivery = receiver.wait_count(1)[0]
    verify(SECRET, delivery.headers, delivery.body)
    assert b'"big":9007199254740993' in delivery.body


# --------------------------------------------------------------------------- several instances


def test_two_instances_claim_disjoint_rows(shared_db: SharedDatabase) -> None:
    """Two stores on one database, claiming at once from many threads, never hold the same row."""
    a, b = shared_db.open(), shared_db.open()
    try:
        target = WebhookTarget("http://127.0.0.1:9/hook")
        for store in (a, b):
            store.set_channels([_channel(target)])
        tokens = a.ensure_initial_credentials()
        assert tokens is not None
        owner = a.authenticate(tokens.instance)
        assert owner is not None
        for i in range(60):
            (a if i % 2 else b).create_request(
                owner=owner, idempotency_key=str(i), tool="t", arguments={}, timeout_seconds=60
            )
        claimed: list[tuple[str, str]] = []
        lock = threading.Lock()
        start = threading.Barrier(6)

        def claim(store: StoreProtocol, owner_id: str) -> None:
            start.wait()
            while True:
                got = store.claim_outbox(
                    owner=owner_id, per_target={"webhooks": 3}, busy={}, limit=3, lease=30
                )
                if not got:
                    return
                with lock:
                    claimed.extend((item.id, owner_id) for item in got)

        threads = [
            threading.Thread(target=claim, args=(store, f"{name}{n}"))
            for name, store in (("a", a), ("b", b))
            for n in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert 60 == len(claimed) == len({item for item, _ in claimed})
        assert [] == a.claim_outbox(
            owner="late", per_target={"webhooks": 100}, busy={}, limit=100, lease=30
        )
    finally:
        a.close()
        b.close()


def _start_in_fleet(fleet: Fleet, hook: Receiver) -> Any:
    return fleet.start(
        "--webhook", hook.url, "--webhook-secret", SECRET, "--webhook-backoff", "0.05"
    )


@pytest.mark.slow
@pytest.mark.postgres
def test_two_instances_deliver_each_event_once(fleet: Fleet) -> None:
    """Events made on either of two instances reach the receiver once each, retries included."""
    with Receiver(statuses=[500] * 8) as hook:
        hook.delay = 0.02
        a, b = _start_in_fleet(fleet, hook), _start_in_fleet(fleet, hook)
        ids = []
        for i in range(12):
            instance = a if i % 2 else b
            made = fleet.api(instance).new()
            ids.append(made["id"])
            decided = fleet.api(b if i % 2 else a, reviewer=True).decide(
                made["id"], {"status": "approved"}
            )
            assert 200 == decided.status_code, decided.text
        got = hook.wait_for(lambda got: sum(d.status == 200 for d in got) >= 24, timeout=60)
        for instance in (a, b):
            instance.process.terminate()
            instance.process.communicate(timeout=20)

    delivered = collections.Counter(d.id for d in got if d.status == 200)
    assert 24 == len(delivered) and {1} == set(delivered.values())
    per_request = collections.Counter(
        (d.json["data"]["id"], d.json["type"]) for d in got if d.status == 200
    )
    assert {(i, t) for i in ids for t in ("request.created", "request.decided")} == set(per_request)
    assert 24 + 8 == len(got)  # each failure retried once more, nothing posted twice besides
    for delivery in got:
        verify(SECRET, delivery.headers, delivery.body)


def test_the_slack_format_says_a_grant_decided_it() -> None:
    """ "issue_refund was approved by grant G of alice", not as if alice had just clicked."""
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    event = {
        "type": "request.decided",
        "timestamp": "2026-01-01T00:00:00Z",
        "data": {
            "id": "r1",
            "tool": "issue_refund",
            "status": "approved",
            "arguments": {"amount": 1},
            "deadline_at": "2026-01-01T00:30:00Z",
            "approvals_required": 1,
            "decision": {"decided_by": "alice", "grant": {"id": "grant_ab12", "uses_left": 2}},
        },
    }
    text = json.dumps(slack_payload(event, public_url=None, now=now))
    assert "approved by grant grant_ab12 of alice" in text
