"""``reviewers add NAME --slack-user U...`` and ``reviewers link``: who a Slack click decides as."""

from __future__ import annotations

from pathlib import Path

import pytest

from approval_guard.provider import Store
from tests.cli.test_reviewers import run


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "provider.sqlite3")


def _linked(db: str, user: str) -> str | None:
    store = Store(db)
    try:
        found = store.reviewer_by_identity("slack", user)
        return None if found is None else found.name
    finally:
        store.close()


def test_add_with_a_slack_user_links_the_new_reviewer(db: str) -> None:
    """``reviewers add alice --role payments --slack-user U0123`` links alice to U0123."""
    code, out, _ = run(
        "reviewers", "add", "alice", "--role", "payments", "--slack-user", "U0123", "--db", db
    )
    assert 0 == code
    assert "Slack user U0123" in out
    assert "alice" == _linked(db, "U0123")


def test_link_links_an_existing_reviewer_and_a_relink_replaces_it(db: str) -> None:
    """``reviewers link bob --slack-user U...``; linking again moves bob to the new id."""
    run("reviewers", "add", "bob", "--db", db)
    assert 0 == run("reviewers", "link", "bob", "--slack-user", "U0BOB", "--db", db)[0]
    assert "bob" == _linked(db, "U0BOB")
    assert 0 == run("reviewers", "link", "bob", "--slack-user", "U0BOB2", "--db", db)[0]
    assert (None, "bob") == (_linked(db, "U0BOB"), _linked(db, "U0BOB2"))


@pytest.mark.parametrize(
    ("argv", "exit_code", "says"),
    [
        (["reviewers", "link", "nobody", "--slack-user", "U0NEW"], 1, "no live reviewer"),
        (["reviewers", "link", "alice", "--slack-user", "alice@example"], 2, "Slack user id"),
        (["reviewers", "link", "bob", "--slack-user", "U0ALICE"], 1, "already linked"),
        (["reviewers", "add", "carol", "--slack-user", "U0ALICE"], 1, "already linked"),
        (["reviewers", "add", "dave", "--slack-user", "u0lower"], 2, "Slack user id"),
    ],
)
def test_a_bad_link_is_refused_and_changes_nothing(
    db: str, argv: list[str], exit_code: int, says: str
) -> None:
    """An unknown name or an id another reviewer has: exit 1; a malformed id: exit 2 (usage)."""
    run("reviewers", "add", "alice", "--slack-user", "U0ALICE", "--db", db)
    run("reviewers", "add", "bob", "--db", db)
    code, _, err = run(*argv, "--db", db)
    assert exit_code == code
    assert says in err
    assert "alice" == _linked(db, "U0ALICE")
    _, listed, _ = run("reviewers", "list", "--db", db)
    assert ["alice", "bob"] == [line.split()[0] for line in listed.strip().splitlines()]


def test_removing_a_reviewer_ends_their_slack_link(db: str) -> None:
    """After ``reviewers remove``, their Slack user id names nobody."""
    run("reviewers", "add", "alice", "--slack-user", "U0ALICE", "--db", db)
    assert 0 == run("reviewers", "remove", "alice", "--db", db)[0]
    assert _linked(db, "U0ALICE") is None
    run("reviewers", "add", "alice", "--db", db)
    assert _linked(db, "U0ALICE") is None


def test_link_takes_a_slack_user_and_an_email_at_once(db: str) -> None:
    """``reviewers link bob --slack-user U... --email ...`` links both; linking again is fine."""
    run("reviewers", "add", "bob", "--db", db)
    argv = ["reviewers", "link", "bob", "--slack-user", "U0BOB", "--email", "bob@example.com"]
    assert 0 == run(*argv, "--db", db)[0]
    assert 0 == run(*argv, "--db", db)[0]
    assert "bob" == _linked(db, "U0BOB")
    store = Store(db)
    try:
        assert ["bob@example.com"] == list(store.identities("email").values())
    finally:
        store.close()


def test_link_without_a_slack_user_or_an_email_is_a_usage_error(db: str) -> None:
    """``reviewers link bob`` alone says what it needs, exit 2."""
    run("reviewers", "add", "bob", "--db", db)
    code, _, err = run("reviewers", "link", "bob", "--db", db)
    assert 2 == code
    assert "--slack-user" in err and "--email" in err


def test_a_link_refused_for_its_slack_user_sets_no_email_either(db: str) -> None:
    """A taken Slack id refuses the whole link: the email given with it is not stored."""
    run("reviewers", "add", "alice", "--slack-user", "U0ALICE", "--db", db)
    run("reviewers", "add", "bob", "--db", db)
    argv = ["reviewers", "link", "bob", "--slack-user", "U0ALICE", "--email", "bob@example.com"]
    assert 1 == run(*argv, "--db", db)[0]
    store = Store(db)
    try:
        assert {} == store.identities("email")
    finally:
        store.close()
