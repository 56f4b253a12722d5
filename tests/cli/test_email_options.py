"""``reviewers add|link --email``, ``serve --smtp-url --smtp-from --email-to``, on real SMTP."""

from __future__ import annotations

import contextlib
import io
import json
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from approval_guard.cli import main
from tests.support.api import Api
from tests.support.cli import subprocess_env
from tests.support.smtp import Mailbox


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "provider.sqlite3")


def test_add_with_an_email_and_list_shows_it(db: str) -> None:
    """``add --email`` keeps the address (lower-cased); ``list`` and ``list --json`` show it."""
    code, out, _ = run("reviewers", "add", "alice", "--email", "Alice@Example.com", "--db", db)
    assert 0 == code and "alice@example.com" in out
    run("reviewers", "add", "bob", "--db", db)
    _, text, _ = run("reviewers", "list", "--db", db)
    assert re.search(r"^alice\s+-\s+alice@example\.com\s", text, re.MULTILINE)
    assert re.search(r"^bob\s+-\s+-\s", text, re.MULTILINE)
    _, as_json, _ = run("reviewers", "list", "--json", "--db", db)
    assert {"alice": "alice@example.com", "bob": None} == {
        row["name"]: row["email"] for row in json.loads(as_json)
    }


def test_link_gives_a_reviewer_an_address_and_refuses_a_taken_one(db: str) -> None:
    """``link`` sets or changes it; another live reviewer's address, or no such reviewer: exit 1."""
    run("reviewers", "add", "alice", "--db", db)
    run("reviewers", "add", "bob", "--email", "bob@example.com", "--db", db)
    assert 0 == run("reviewers", "link", "alice", "--email", "alice@example.com", "--db", db)[0]
    code, _, err = run("reviewers", "link", "alice", "--email", "bob@example.com", "--db", db)
    assert 1 == code and "another live reviewer" in err
    assert 1 == run("reviewers", "link", "nobody", "--email", "x@example.com", "--db", db)[0]
    assert 2 == run("reviewers", "link", "alice", "--db", db)[0]  # nothing to link
    code, _, err = run("reviewers", "add", "carol", "--email", "bob@example.com", "--db", db)
    assert 1 == code
    _, as_json, _ = run("reviewers", "list", "--json", "--db", db)
    assert ["alice", "bob"] == [row["name"] for row in json.loads(as_json)]


@pytest.mark.parametrize("address", ["not-an-address", "Alice <a@example.com>", "a@b.c,d@e.f"])
def test_a_bad_address_is_a_usage_error(db: str, address: str) -> None:
    """Anything but a plain local@domain: exit 2, nothing added."""
    assert 2 == run("reviewers", "add", "alice", "--email", address, "--db", db)[0]
    _, as_json, _ = run("reviewers", "list", "--json", "--db", db)
    assert [] == json.loads(as_json)


@pytest.mark.parametrize(
    "argv",
    [
        ["--email-to", "role:payments"],
        ["--smtp-url", "smtp://127.0.0.1:2525"],
        ["--smtp-url", "smtp://bot:cli-secret-5@mail.example.com", "--smtp-from", "a@example.com"],
        ["--smtp-url", "smtp://127.0.0.1:2525", "--smtp-from", "a@example.com", "--email-to", "x"],
    ],
    ids=["no-url", "no-from", "password-in-clear", "bad-recipient"],
)
def test_serve_refuses_an_incomplete_or_bad_email_setup(db: str, argv: list[str]) -> None:
    """Exit 2 before binding, with a message that never quotes a password."""
    code, out, err = run("serve", "--db", db, "--port", "0", *argv)
    assert 2 == code
    assert "cli-secret-5" not in out + err


def test_serve_mails_a_new_request_to_a_role(tmp_path: Path) -> None:
    """``serve --smtp-url ... --email-to role:payments``: alice's mail arrives with her links."""
    db = str(tmp_path / "provider.sqlite3")
    run(
        "reviewers",
        "add",
        "alice",
        "--role",
        "payments",
        "--email",
        "alice@example.com",
        "--db",
        db,
    )
    box = Mailbox().start()
    instance = "agi_" + secrets.token_urlsafe(24)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "approval_guard",
            "serve",
            "--db",
            db,
            "--port",
            "0",
            "--instance-token",
            instance,
            "--smtp-url",
            box.url,
            "--smtp-from",
            "approvals@example.com",
            "--email-to",
            "role:payments",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:
            found = re.search(r"listening on (\S+)", line)
            url = found.group(1) if found else url
            if "Email: mailing approval links through smtp://127.0.0.1" in line:
                break
        assert url is not None
        created = Api(url, instance).new(tool="issue_refund")
        mail = box.wait_until(lambda m: m.message["X-Approval-Guard-Request"] == created["id"])
        assert ["alice@example.com"] == mail.rcpt_tos
        assert mail.links()["approve"].startswith(f"{url}/email/requests/{created['id']}?token=")
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=15)
        box.stop()
