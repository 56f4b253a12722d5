"""API 1.3: a create's ``batch`` and ``context``; ``POST /v1/decisions``. SQLite, PostgreSQL."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
import requests

from approval_guard.provider import PostgresStore, ProviderServer, Store
from approval_guard.provider.store.checks import body_hash
from approval_guard.provider.store.protocol import StoreProtocol
from tests.support.api import REFUND, Api, error_type, signed_in

RULES = """\
[tools.delete_user]
approvers = ["admin"]

[tools.pay_out]
approvals_required = 2

[tools.own_refund]
self_approval = false
"""


@attrs.define
class Provider:
    server: ProviderServer
    store: StoreProtocol
    instance: Api
    reviewer: Api
    tokens: dict[str, str]

    def as_reviewer(self, name: str) -> Api:
        return Api(self.server.url, self.tokens[name])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Provider]:
    """A provider on a SQLite file or a PostgreSQL schema, with a rules file; alice is no admin."""
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    store: StoreProtocol
    if request.param == "sqlite":
        store = Store(str(tmp_path / "provider.sqlite3"))
    else:
        store = PostgresStore(request.getfixturevalue("pg_schema_dsn"))
    server = ProviderServer(store, rules=rules)
    tokens = server.first_start_tokens
    assert tokens is not None
    names = {
        "alice": store.add_reviewer("alice", roles=["payments"]),
        "bob": store.add_reviewer("bob", roles=["payments"]),
    }
    server.start()
    try:
        yield Provider(
            server=server,
            store=store,
            instance=Api(server.url, tokens.instance),
            reviewer=Api(server.url, tokens.reviewer),
            tokens=names,
        )
    finally:
        server.close()
        store.close()


def _body(**extra: Any) -> dict[str, Any]:
    return {"tool": "issue_refund", "arguments": REFUND, "timeout": "30m", **extra}


def _decide_many(api: Api, body: Any) -> requests.Response:
    return api.session.post(f"{api.url}/v1/decisions", json=body, headers=api.headers(), timeout=30)


# --------------------------------------------------------------------------- batch and context


def test_batch_and_context_are_kept_and_echoed(provider: Provider) -> None:
    """A create's batch and context come back on the create, a poll and the reviewer's list."""
    context = "Refunding the duplicate charge the customer reported in ticket 4411."
    created = provider.instance.new(body=_body(batch="turn-17", context=context))
    assert "turn-17" == created["batch"]
    assert context == created["context"]
    polled = provider.instance.poll(created["id"]).json()
    assert ("turn-17", context) == (polled["batch"], polled["context"])
    listed = provider.reviewer.get("/v1/requests").json()["requests"]
    assert [("turn-17", context)] == [(one["batch"], one["context"]) for one in listed]


def test_a_request_without_them_has_neither_field(provider: Provider) -> None:
    """A 1.2 create is answered as before: no batch, no context key at all."""
    created = provider.instance.new(body=_body())
    assert "batch" not in created and "context" not in created
    listed = provider.reviewer.get("/v1/requests").json()["requests"][0]
    assert "batch" not in listed and "context" not in listed
    assert "context" not in listed["display"] and "batch" not in listed["display"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch", ""),
        ("batch", 17),
        ("batch", "x" * 201),
        ("batch", " turn"),
        ("batch", "turn\n17"),
        ("batch", "turn\u202e17"),
        ("batch", ["turn"]),
        ("context", "x" * 1001),
        ("context", 5),
        ("context", {"reason": "x"}),
    ],
)
def test_a_bad_batch_or_context_is_400_and_creates_nothing(
    provider: Provider, field: str, value: Any
) -> None:
    """Out-of-bounds or mistyped values are 400 invalid_request (never 500); nothing is kept."""
    response = provider.instance.create(body=_body(**{field: value}))
    assert 400 == response.status_code, response.text
    assert "invalid_request" == error_type(response)
    assert field in response.json()["error"]["message"]
    assert [] == provider.reviewer.get("/v1/requests").json()["requests"]


def test_an_empty_context_is_echoed_and_shown_nowhere(provider: Provider) -> None:
    """``"context": ""`` is kept and echoed; the reviewer's display has nothing to show."""
    created = provider.instance.new(body=_body(context=""))
    assert "" == created["context"]
    listed = provider.reviewer.get("/v1/requests").json()["requests"][0]
    assert "" == listed["context"] and "context" not in listed["display"]


def test_the_display_escapes_the_context_and_keeps_its_lines(provider: Provider) -> None:
    """A bidi override is shown as \\u202e; line breaks stay; the echo keeps the exact text."""
    created = provider.instance.new(body=_body(context="one\u202etwo\nthree"))
    assert "one\u202etwo\nthree" == created["context"]
    listed = provider.reviewer.get("/v1/requests").json()["requests"][0]
    assert "one\\u202etwo\nthree" == listed["display"]["context"]


def test_the_longest_values_are_accepted(provider: Provider) -> None:
    """A 200-character batch and a 1,000-character context are within bounds."""
    created = provider.instance.new(body=_body(batch="b" * 200, context="c" * 1000))
    assert ("b" * 200, "c" * 1000) == (created["batch"], created["context"])


def test_context_and_batch_are_part_of_the_idempotency_body(provider: Provider) -> None:
    """The same key with another context or batch is 422; the same body replays."""
    first = provider.instance.create(key="k1", body=_body(batch="t1", context="because"))
    assert 201 == first.status_code
    assert (
        200
        == provider.instance.create(key="k1", body=_body(batch="t1", context="because")).status_code
    )
    for other in (
        _body(batch="t1", context="another reason"),
        _body(batch="t2", context="because"),
        _body(batch="t1"),
        _body(context="because"),
    ):
        reused = provider.instance.create(key="k1", body=other)
        assert 422 == reused.status_code, other
        assert "idempotency_key_reused" == error_type(reused)


def test_a_body_without_them_hashes_as_it_always_did() -> None:
    """The hash of a 1.2 body is unchanged (a stored key still replays after the upgrade)."""
    old = hashlib.sha256(b'{"arguments":{"a":1},"timeout":"1m","tool":"t"}').hexdigest()
    assert old == body_hash("t", {"a": 1}, 60, batch=None, context=None)
    assert body_hash("t", {"a": 1}, 60, context="x") != body_hash("t", {"a": 1}, 60)
    assert body_hash("t", {"a": 1}, 60, batch="x") != body_hash("t", {"a": 1}, 60, context="x")


_OLD_REQUESTS = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE requests (
    id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    body_sha256 TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
    timeout TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL, decision_status TEXT, decision_note TEXT,
    decided_at INTEGER, expires_at INTEGER, decided_by TEXT, cancelled_at INTEGER,
    cancel_reason TEXT, poll_count INTEGER NOT NULL DEFAULT 0, last_polled_at INTEGER,
    editable TEXT, decision_arguments TEXT, requested_by TEXT, approvals_required INTEGER,
    approval_list TEXT, decided_by_name TEXT);
"""


def test_a_database_the_previous_version_made_opens_and_migrates(tmp_path: Path) -> None:
    """A file with the 1.2 requests table (a request in it) gets the columns; both work."""
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(_OLD_REQUESTS)
        db.execute(
            "INSERT INTO requests (id, owner_id, idempotency_key, body_sha256, tool, arguments, "
            "timeout, status, created_at, deadline_at) VALUES "
            "('old-1', 'x', 'k', 'h', 'issue_refund', '{}', '30m', 'pending', 1, 9999999999999999)"
        )
    db.close()
    with ProviderServer(str(path)) as server:
        tokens = server.first_start_tokens
        assert tokens is not None
        old = server.store.get_request("old-1")
        assert old is not None and (old.batch, old.context) == (None, None)
        instance = Api(server.url, tokens.instance)
        created = instance.new(body=_body(batch="turn-1", context="why"))
        assert ("turn-1", "why") == (created["batch"], created["context"])
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(requests)")]
    db.close()
    assert {"batch", "context"} <= set(columns)


@pytest.mark.postgres
def test_a_postgres_schema_the_previous_version_made_migrates(pg_schema_dsn: str) -> None:
    """ag_requests without the two columns (as 1.2 made it) gets them on open."""
    import psycopg

    PostgresStore(pg_schema_dsn).close()

    with psycopg.connect(pg_schema_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE ag_requests DROP COLUMN batch, DROP COLUMN context")
    store = PostgresStore(pg_schema_dsn)
    try:
        with ProviderServer(store) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            created = Api(server.url, tokens.instance).new(body=_body(batch="t", context="c"))
            assert ("t", "c") == (created["batch"], created["context"])
    finally:
        store.close()


# --------------------------------------------------------------------------- POST /v1/decisions


def test_decisions_decide_exactly_the_listed_ids_in_order(provider: Provider) -> None:
    """Three of a batch listed: each approved, results in the order given; a 4th stays pending."""
    made = [provider.instance.new(body=_body(batch="turn-1")) for _ in range(3)]
    ids = [one["id"] for one in reversed(made)]
    joined_later = provider.instance.new(body=_body(batch="turn-1"))
    answer = _decide_many(provider.reviewer, {"ids": ids, "status": "approved", "note": "ok"})
    assert 200 == answer.status_code, answer.text
    assert [{"id": one, "status": "approved"} for one in ids] == answer.json()["results"]
    for one in ids:
        polled = provider.instance.poll(one).json()
        assert ("approved", "ok") == (polled["status"], polled["decision"]["note"])
    assert "pending" == provider.instance.poll(joined_later["id"]).json()["status"]


def test_a_refused_id_never_stops_the_others(provider: Provider) -> None:
    """Unknown, already decided and forbidden ids get their own errors; the rest are decided."""
    first = provider.instance.new(body=_body())
    decided = provider.instance.new(body=_body())
    assert 200 == provider.reviewer.decide(decided["id"], {"status": "denied"}).status_code
    admin_only = provider.instance.new(body={**_body(), "tool": "delete_user"})
    last = provider.instance.new(body=_body())
    ids = [first["id"], "no-such-request", decided["id"], admin_only["id"], last["id"]]
    answer = _decide_many(provider.as_reviewer("alice"), {"ids": ids, "status": "approved"})
    assert 200 == answer.status_code, answer.text
    results = answer.json()["results"]
    assert ids == [one["id"] for one in results]
    assert {"id": first["id"], "status": "approved"} == results[0]
    assert "not_found" == results[1]["error"]["type"]
    assert "not_pending" == results[2]["error"]["type"]
    assert "forbidden" == results[3]["error"]["type"]
    assert "admin" in results[3]["error"]["message"]
    assert {"id": last["id"], "status": "approved"} == results[4]
    assert "pending" == provider.instance.poll(admin_only["id"]).json()["status"]


def test_each_listed_decision_is_audited_as_if_alone(provider: Provider) -> None:
    """Each decided id has its own request.decision audit row, naming the reviewer."""
    ids = [provider.instance.new(body=_body(batch="b"))["id"] for _ in range(2)]
    answer = _decide_many(provider.reviewer, {"ids": ids, "status": "denied", "note": "no"})
    assert ["denied", "denied"] == [one["status"] for one in answer.json()["results"]]
    for one in ids:
        rows = [row for row in provider.store.audit(request_id=one)]
        denials = [row for row in rows if row.action == "request.denial"]
        assert ["reviewer"] == [row.actor for row in denials], rows


@pytest.mark.parametrize(
    "body",
    [
        {"status": "approved"},
        {"ids": [], "status": "approved"},
        {"ids": "abc", "status": "approved"},
        {"ids": [1, 2], "status": "approved"},
        {"ids": ["a", "a"], "status": "approved"},
        {"ids": [f"id-{n}" for n in range(101)], "status": "approved"},
        {"ids": ["a"], "status": "maybe"},
        {"ids": ["a"], "status": "approved", "valid_for": "forever"},
        {"ids": ["a"], "status": "approved", "arguments": {}},
        {"ids": [""], "status": "approved"},
    ],
)
def test_a_bad_decisions_body_is_400_and_decides_nothing(provider: Provider, body: Any) -> None:
    """No ids, too many, duplicates, bad fields or edits: 400 invalid_request, nothing decided."""
    pending = provider.instance.new(body=_body())
    if body.get("ids") == ["a"]:
        body = {**body, "ids": [pending["id"]]}
    answer = _decide_many(provider.reviewer, body)
    assert 400 == answer.status_code, answer.text
    assert "invalid_request" == error_type(answer)
    assert "pending" == provider.instance.poll(pending["id"]).json()["status"]


def test_an_instance_credential_may_not_decide_many(provider: Provider) -> None:
    """The agent's own credential gets 403 forbidden, and nothing is decided."""
    pending = provider.instance.new(body=_body())
    answer = _decide_many(provider.instance, {"ids": [pending["id"]], "status": "approved"})
    assert 403 == answer.status_code
    assert "forbidden" == error_type(answer)
    assert "pending" == provider.instance.poll(pending["id"]).json()["status"]
    assert (
        401
        == _decide_many(
            Api(provider.server.url, None), {"ids": [pending["id"]], "status": "approved"}
        ).status_code
    )


def test_each_listed_id_keeps_its_own_rules(provider: Provider) -> None:
    """A quorum tool stays pending after one approval; approving one's own request is refused."""
    quorum = provider.instance.new(body={**_body(), "tool": "pay_out"})
    own = provider.instance.new(body={**_body(), "tool": "own_refund", "requested_by": "alice"})
    plain = provider.instance.new(body=_body())
    ids = [quorum["id"], own["id"], plain["id"]]
    answer = _decide_many(provider.as_reviewer("alice"), {"ids": ids, "status": "approved"})
    results = answer.json()["results"]
    assert {"id": quorum["id"], "status": "pending"} == results[0]
    assert "forbidden" == results[1]["error"]["type"]
    assert {"id": plain["id"], "status": "approved"} == results[2]
    assert ["alice"] == [
        one["by"] for one in provider.instance.poll(quorum["id"]).json()["approvals"]
    ]
    again = _decide_many(
        provider.as_reviewer("alice"), {"ids": [quorum["id"]], "status": "approved"}
    )
    assert "already_approved" == again.json()["results"][0]["error"]["type"]
    done = _decide_many(provider.as_reviewer("bob"), {"ids": [quorum["id"]], "status": "approved"})
    assert [{"id": quorum["id"], "status": "approved"}] == done.json()["results"]


def test_the_page_session_decides_many_only_with_its_csrf_header(provider: Provider) -> None:
    """The review page's cookie without X-CSRF-Token is 403; with it, the ids are decided."""
    pending = provider.instance.new(body=_body())
    assert provider.reviewer.token is not None
    session, csrf = signed_in(
        SimpleNamespace(url=provider.server.url, reviewer_credential=provider.reviewer.token)
    )
    body = {"ids": [pending["id"]], "status": "approved"}
    url = f"{provider.server.url}/v1/decisions"
    refused = session.post(url, json=body, timeout=10)
    assert 403 == refused.status_code
    assert "pending" == provider.instance.poll(pending["id"]).json()["status"]
    answer = session.post(url, json=body, headers={"X-CSRF-Token": csrf}, timeout=10)
    assert [{"id": pending["id"], "status": "approved"}] == answer.json()["results"]
    rows = provider.store.audit(request_id=pending["id"])
    assert ["page"] == [r.detail["channel"] for r in rows if r.action == "request.approval"]


def test_a_lone_surrogate_in_context_is_400(provider: Provider) -> None:
    """Text the store could not keep exactly is refused as bad input, never a 500."""
    raw = b'{"tool": "t", "arguments": {}, "timeout": "1m", "context": "\\ud800"}'
    response = provider.instance.post_raw("/v1/requests", raw, **{"Idempotency-Key": "k-sur"})
    assert 400 == response.status_code, response.text
    assert "surrogate" in response.json()["error"]["message"]


def test_a_hundred_ids_are_decided(provider: Provider) -> None:
    """The documented bound, 100 ids, is accepted and every one is decided."""
    ids = [provider.instance.new(body=_body())["id"] for _ in range(100)]
    answer = _decide_many(provider.reviewer, {"ids": ids, "status": "approved", "valid_for": "1m"})
    assert 200 == answer.status_code
    assert ["approved"] * 100 == [one["status"] for one in answer.json()["results"]]
