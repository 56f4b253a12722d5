"""``approval-guard reviewers add|list|remove`` and ``audit``: real files, real HTTP."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import requests

from approval_guard.cli import main
from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.http.limits import SESSION_COOKIE
from tests.support.api import Api, sign_in


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "provider.sqlite3")


def test_add_prints_the_token_last_and_keeps_only_its_hash(db: str) -> None:
    """The token is the output's last word, authenticates as that reviewer, is not in the file."""
    code, out, _ = run(
        "reviewers", "add", "alice", "--role", "payments", "--role", "admin", "--db", db
    )
    assert 0 == code
    token = out.split()[-1]
    assert token.startswith("agr_")
    store = Store(db)
    try:
        found = store.authenticate(token)
        assert found is not None
        assert ("alice", ("payments", "admin"), "reviewer") == (found.name, found.roles, found.kind)
    finally:
        store.close()
    assert token.encode() not in Path(db).read_bytes()


def test_list_shows_name_roles_and_created_never_a_token(db: str) -> None:
    """``reviewers list``: one line each (and JSON), no token anywhere."""
    _, out, _ = run("reviewers", "add", "alice", "--role", "payments", "--db", db)
    token = out.split()[-1]
    run("reviewers", "add", "bob", "--db", db)
    code, listed, _ = run("reviewers", "list", "--db", db)
    assert 0 == code
    lines = listed.strip().splitlines()
    assert lines[0].split()[:2] == ["alice", "payments"]
    assert lines[1].split()[:2] == ["bob", "-"]
    assert token not in listed
    _, as_json, _ = run("reviewers", "list", "--json", "--db", db)
    rows = json.loads(as_json)
    assert [("alice", ["payments"]), ("bob", [])] == [(r["name"], r["roles"]) for r in rows]
    assert all(set(r) == {"name", "roles", "email", "links", "created_at"} for r in rows)


@pytest.mark.parametrize(
    ("name", "words"),
    [("", "1 to 64"), ("x" * 65, "1 to 64"), ("bad\nname", "printable"), ("   ", "printable")],
)
def test_a_bad_name_is_a_clear_error(db: str, name: str, words: str) -> None:
    """Names are 1-64 printable characters; the CLI says so and exits 1."""
    code, out, err = run("reviewers", "add", name, "--db", db)
    assert 1 == code
    assert words in err
    assert "" == out


def test_a_name_taken_by_a_live_reviewer_is_refused_and_free_again_after_removal(db: str) -> None:
    """Unique among live reviewers: a second alice is refused until the first is removed."""
    assert 0 == run("reviewers", "add", "alice", "--db", db)[0]
    code, _, err = run("reviewers", "add", "alice", "--db", db)
    assert 1 == code and "already named 'alice'" in err
    assert 0 == run("reviewers", "remove", "alice", "--db", db)[0]
    assert 0 == run("reviewers", "add", "alice", "--db", db)[0]
    code, _, err = run("reviewers", "remove", "nobody", "--db", db)
    assert 1 == code and "nobody" in err


def test_a_removed_reviewer_gets_401_and_their_page_session_ends(db: str) -> None:
    """Removal revokes the token (API 401) and ends the page session at once."""
    _, out, _ = run("reviewers", "add", "alice", "--role", "payments", "--db", db)
    token = out.split()[-1]
    with ProviderServer(db) as server:
        api = Api(server.url, token)
        assert 200 == api.get("/v1/requests").status_code
        signed_in = sign_in(server.url, token)
        assert 303 == signed_in.status_code
        session_id = signed_in.cookies[SESSION_COOKIE]
        assert server.store.session(session_id) is not None
        page = requests.get(server.url, cookies={SESSION_COOKIE: session_id}, timeout=5)
        assert "review" in page.text.lower() and 200 == page.status_code
        logged_in_page = page.text

        assert 0 == run("reviewers", "remove", "alice", "--db", db)[0]

        assert 401 == api.get("/v1/requests").status_code
        assert server.store.session(session_id) is None
        again = requests.get(server.url, cookies={SESSION_COOKIE: session_id}, timeout=5)
        assert again.text != logged_in_page  # the login form, not the page
        assert 401 == sign_in(server.url, token).status_code


def test_a_named_reviewer_decides_on_the_api_and_audit_lists_everything(db: str) -> None:
    """alice's token decides; ``audit`` prints added, created, approval (and --json, --since)."""
    _, out, _ = run("reviewers", "add", "alice", "--db", db)
    token = out.split()[-1]
    with ProviderServer(db) as server:
        assert server.first_start_tokens is not None
        instance = Api(server.url, server.first_start_tokens.instance)
        created = instance.new()
        done = Api(server.url, token).decide(created["id"], {"status": "approved"})
        assert "alice" == done.json()["decision"]["decided_by"]
        server.store.record_audit(
            "webhook.delivered", "system", "system", created["id"], {"url": "https://h.example/"}
        )
    run("reviewers", "remove", "alice", "--db", db)
    code, text, _ = run("audit", "--db", db)
    assert 0 == code
    actions = [line.split()[3] for line in text.strip().splitlines()]
    assert [
        "reviewer.added",
        "request.created",
        "request.approval",
        "webhook.delivered",
        "reviewer.removed",
    ] == actions
    assert token not in text
    _, as_json, _ = run("audit", "--json", "--since", "1h", "--db", db)
    rows = json.loads(as_json)
    assert actions == [r["action"] for r in rows]
    assert ["cli", "127.0.0.1", "127.0.0.1", "system", "cli"] == [r["source"] for r in rows]
    assert ["cli", "instance", "alice", "system", "cli"] == [r["actor"] for r in rows]
    store = Store(db)
    try:
        future = store.audit(since=store.now() + __import__("datetime").timedelta(hours=1))
        assert [] == future
    finally:
        store.close()


def test_an_older_sqlite_database_gets_the_new_columns_on_open(db: str) -> None:
    """A database made before roles/requested_by/approvals is migrated (ALTER TABLE) on open."""
    import sqlite3

    Store(db).close()
    raw = sqlite3.connect(db)
    for table, column in (
        ("credentials", "roles"),
        ("requests", "requested_by"),
        ("requests", "approvals_required"),
        ("requests", "approval_list"),
        ("requests", "decided_by_name"),
    ):
        raw.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    raw.commit()
    raw.close()
    store = Store(db)
    try:
        token = store.add_reviewer("alice", roles=["payments"])
        found = store.authenticate(token)
        assert found is not None and ("payments",) == found.roles
    finally:
        store.close()
