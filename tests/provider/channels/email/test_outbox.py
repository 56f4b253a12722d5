"""The mail outbox: an SMTP outage never blocks a request, and a restart loses no mail."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from approval_guard.provider import StoreProtocol
from approval_guard.provider.channels.base import PENDING_DELIVERY
from approval_guard.provider.store.sql.outbox_rows import OutboxRow
from tests.support.api import Api, wait_for
from tests.support.mail_team import Clock, mailing_server, start_mail_team
from tests.support.smtp import Mailbox, SlowGreeting

Opener = Callable[[], StoreProtocol]


def _settled(store: StoreProtocol, request_id: str, timeout: float = 15.0) -> list[OutboxRow]:
    """The request's mails once none is pending any more."""
    return wait_for(
        lambda: store.list_outbox(channels=["email"], request_id=request_id),
        lambda rows: rows and all(row.state != PENDING_DELIVERY for row in rows),
        timeout=timeout,
        what="mail still pending",
    )


def _tried(store: StoreProtocol, request_id: str, attempts: int) -> list[OutboxRow]:
    """The request's mails once each was tried at least ``attempts`` times."""
    return wait_for(
        lambda: store.list_outbox(channels=["email"], request_id=request_id),
        lambda rows: rows and all(row.attempts >= attempts for row in rows),
        timeout=15,
        what=f"not tried {attempts} times",
    )


def test_smtp_down_the_request_is_made_and_the_mail_goes_once_smtp_is_back(
    make_store: tuple[Opener, Clock],
) -> None:
    """With SMTP refusing connections a create answers 201 at once; the mail follows, once."""
    open_, clock = make_store
    box = Mailbox()  # not started yet: its port refuses connections
    team = start_mail_team(open_(), box, clock, to=("alice@example.com",))
    try:
        started = time.monotonic()
        created = team.instance.new(tool="issue_refund")
        assert time.monotonic() - started < 2
        (row,) = _tried(team.store, created["id"], 2)
        assert "pending" == row.state and row.last_result is not None
        assert "ConnectionRefusedError" in row.last_result
        box.start()
        (sent,) = _settled(team.store, created["id"])
        assert "delivered" == sent.state
        mail = team.mail_for(created["id"], "alice@example.com")
        assert mail.links()
        # One row, settled: a second send needs a second row or this one pending again.
        assert 1 == len(box.received)
        # The audit row is written after the row settles: wait for it, then count it once.
        rows = wait_for(
            lambda: [r.action for r in team.store.audit(request_id=created["id"])],
            lambda actions: "email.sent" in actions,
            what="the email.sent audit row",
        )
        assert 1 == rows.count("email.sent")
    finally:
        team.server.close()
        box.close()


def test_a_mail_queued_before_a_restart_is_sent_after_it(make_store: tuple[Opener, Clock]) -> None:
    """Created while SMTP is down, the provider stopped; a new one on the same database sends it."""
    open_, clock = make_store
    box = Mailbox()
    team = start_mail_team(open_(), box, clock, to=("alice@example.com",))
    created = team.instance.new(tool="issue_refund")
    _tried(team.store, created["id"], 1)
    team.server.close()
    team.store.close()
    box.start()
    store = open_()
    again = mailing_server(store, box, ("alice@example.com",)).start()
    try:
        (sent,) = _settled(store, created["id"])
        assert "delivered" == sent.state and sent.attempts >= 2
        links = team.mail_for(created["id"], "alice@example.com").links()
        token = links["approve"].split("token=")[1]
        answer = Api(again.url, team.tokens["instance"]).poll(created["id"]).json()
        assert "pending" == answer["status"]
        import requests

        done = requests.post(
            f"{again.url}/email/requests/{created['id']}/decision",
            data={"token": token},
            timeout=10,
        )
        assert 200 == done.status_code
    finally:
        again.close()
        box.close()


def test_a_stop_while_a_mail_is_in_flight_records_it_and_it_is_not_sent_again(
    make_store: tuple[Opener, Clock],
) -> None:
    """The stop waits for SMTP to accept the mail and settles it: a restart mails nothing."""
    open_, clock = make_store
    box = Mailbox().start()
    box.delay = 1.0  # the server takes a second to accept the mail
    team = start_mail_team(open_(), box, clock, to=("alice@example.com",))
    created = team.instance.new(tool="issue_refund")
    assert box.arrived.wait(10)  # the mail is in flight, not accepted yet
    team.server.close()
    team.store.close()
    assert 1 == len(box.received)
    box.delay = 0.0
    store = open_()
    again = mailing_server(store, box, ("alice@example.com",)).start()
    try:
        # Settled is the signal: a mail the stop left pending is sent again before that.
        (sent,) = _settled(store, created["id"])
        assert 1 == len(box.received)
        assert ("delivered", 1) == (sent.state, sent.attempts)
    finally:
        again.close()
        box.close()


def test_a_request_decided_before_its_mail_went_is_not_mailed(
    make_store: tuple[Opener, Clock],
) -> None:
    """Approved on the API while SMTP was down: when SMTP is back the mail is skipped, not sent."""
    open_, clock = make_store
    box = Mailbox()
    team = start_mail_team(open_(), box, clock, to=("alice@example.com",))
    try:
        created = team.instance.new(tool="issue_refund")
        _tried(team.store, created["id"], 1)
        assert 200 == team.reviewer("bob").decide(created["id"], {"status": "approved"}).status_code
        box.start()
        (row,) = _settled(team.store, created["id"])
        assert "skipped" == row.state
        assert [] == box.received
    finally:
        team.server.close()
        box.close()


@pytest.mark.postgres
def test_two_instances_claim_disjoint_mail(pg_schema_dsn: str) -> None:
    """Two stores on one database claiming from many threads never hold the same mail."""
    import threading

    from approval_guard.provider import PostgresStore
    from approval_guard.provider.channels.email.channel import EmailChannel
    from approval_guard.provider.channels.email.recipients import email_routes
    from approval_guard.provider.channels.email.settings import email_settings
    from approval_guard.provider.rules.config import NO_RULES

    a, b = PostgresStore(pg_schema_dsn), PostgresStore(pg_schema_dsn)
    try:
        to = ["role:payments"]
        settings = email_settings("smtp://127.0.0.1:9", "approvals@example.com", to, environ={})
        channel = EmailChannel(settings, email_routes(to), NO_RULES, "http://127.0.0.1:9")
        for store in (a, b):
            store.set_channels([channel])
        a.add_reviewer("alice", roles=["payments"])
        a.link_identity("alice", "email", "alice@example.com")
        tokens = a.ensure_initial_credentials()
        assert tokens is not None
        owner = a.authenticate(tokens.instance)
        assert owner is not None
        for i in range(40):
            (a if i % 2 else b).create_request(
                owner=owner, idempotency_key=str(i), tool="t", arguments={}, timeout_seconds=600
            )
        claimed: list[str] = []
        lock = threading.Lock()
        start = threading.Barrier(6)

        def claim(store: PostgresStore, name: str) -> None:
            start.wait()
            while True:
                got = store.claim_outbox(
                    owner=name, per_target={"email": 3}, busy={}, limit=3, lease=30
                )
                if not got:
                    return
                with lock:
                    claimed.extend(item.id for item in got)

        threads = [
            threading.Thread(target=claim, args=(store, f"{label}{n}"))
            for label, store in (("a", a), ("b", b))
            for n in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert 40 == len(claimed) == len(set(claimed))
        assert [] == b.claim_outbox(
            owner="late", per_target={"email": 100}, busy={}, limit=100, lease=30
        )
    finally:
        a.close()
        b.close()


def test_a_mail_that_cannot_go_before_the_deadline_is_given_up(
    make_store: tuple[Opener, Clock],
) -> None:
    """SMTP down and the next retry after the request's deadline: given up, in the audit trail."""
    open_, clock = make_store
    box = Mailbox()  # never started
    team = start_mail_team(open_(), box, clock, to=("alice@example.com",))
    team.server.close()
    server = mailing_server(team.store, box, ("alice@example.com",), backoff=3600).start()
    instance = Api(server.url, team.tokens["instance"])
    try:
        created = instance.new(tool="issue_refund", timeout="10m")
        (row,) = _settled(team.store, created["id"])
        assert ("given_up", 1) == (row.state, row.attempts)
        assert "ConnectionRefusedError" in (row.last_result or "")
        # The audit row is written just after the row's state: waited for, not raced.
        wait_for(
            lambda: [r.action for r in team.store.audit(request_id=created["id"])],
            lambda actions: "email.given_up" in actions,
            timeout=10,
        )
        assert "pending" == instance.poll(created["id"]).json()["status"]
    finally:
        server.close()
        box.close()


def test_a_request_decided_while_its_mail_connects_is_not_mailed(
    make_store: tuple[Opener, Clock],
) -> None:
    """Decided while the SMTP server is slow to greet: the mail is skipped right before it goes."""
    open_, clock = make_store
    slow = SlowGreeting()
    team = start_mail_team(open_(), cast(Any, slow), clock, to=("alice@example.com",))
    try:
        created = team.instance.new(tool="issue_refund")
        assert slow.connected.wait(15)
        assert 200 == team.reviewer("bob").decide(created["id"], {"status": "approved"}).status_code
        slow.greet()
        (row,) = _settled(team.store, created["id"])
        assert ("skipped", 0) == (row.state, slow.mail_from)
    finally:
        team.server.close()
        slow.close()
