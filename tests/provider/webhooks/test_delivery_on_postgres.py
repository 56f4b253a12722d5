"""Webhooks from several provider instances on one PostgreSQL database: each event posted once."""

from __future__ import annotations

import collections
import threading
from typing import Any

import pytest

from approval_guard.provider import PostgresStore
from approval_guard.provider.webhooks.signing import WebhookTarget, new_secret, verify
from tests.support.fleet import Fleet
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.postgres

SECRET = new_secret()


def test_two_instances_claim_disjoint_rows(pg_schema_dsn: str) -> None:
    """Two stores claiming at once from many threads never hold the same row."""
    a, b = PostgresStore(pg_schema_dsn), PostgresStore(pg_schema_dsn)
    try:
        target = WebhookTarget("http://127.0.0.1:9/hook")
        for store in (a, b):
            store.set_webhooks([target])
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

        def claim(store: PostgresStore, owner_id: str) -> None:
            start.wait()
            while True:
                got = store.claim_webhooks(owner=owner_id, urls=[target.url], limit=3, lease=30)
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
        assert [] == a.claim_webhooks(owner="late", urls=[target.url], limit=100, lease=30)
    finally:
        a.close()
        b.close()


def _start(fleet: Fleet, hook: Receiver) -> Any:
    return fleet.start(
        "--webhook", hook.url, "--webhook-secret", SECRET, "--webhook-backoff", "0.05"
    )


@pytest.mark.slow
def test_two_instances_deliver_each_event_once(fleet: Fleet) -> None:
    """Events made on either of two instances reach the receiver once each, retries included."""
    with Receiver(statuses=[500] * 8) as hook:
        hook.delay = 0.02
        a, b = _start(fleet, hook), _start(fleet, hook)
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
