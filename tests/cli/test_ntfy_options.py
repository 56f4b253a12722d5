"""``reviewers link --ntfy-topic``, ``serve --ntfy-url`` with ``APPROVAL_GUARD_NTFY_TOKEN``."""

from __future__ import annotations

import contextlib
import io
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from approval_guard.cli import main
from approval_guard.provider import Store
from tests.support.api import Api
from tests.support.cli import free_port, subprocess_env
from tests.support.fake_ntfy import TOKEN, FakeNtfy

TOPIC = "alice-Zq3xW8rT5yU2"


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


def _identity(db: str, name: str) -> str | None:
    store = Store(db)
    try:
        reviewer = next(one for one in store.list_reviewers() if one.name == name)
        return store.identities("ntfy").get(reviewer.id)
    finally:
        store.close()


def test_link_gives_a_topic_by_flag_or_channel_and_refuses_a_bad_or_taken_one(db: str) -> None:
    """``--ntfy-topic`` and ``--channel ntfy:`` link a topic; a bad or taken one is refused."""
    for name in ("alice", "bob"):
        assert run("reviewers", "add", name, "--role", "payments", "--db", db)[0] == 0
    assert run("reviewers", "link", "alice", "--ntfy-topic", TOPIC, "--db", db)[0] == 0
    assert _identity(db, "alice") == TOPIC
    assert run("reviewers", "link", "bob", "--channel", "ntfy:bob-Kp9mN4vB7cX1", "--db", db)[0] == 0
    assert _identity(db, "bob") == "bob-Kp9mN4vB7cX1"
    code, _, err = run("reviewers", "link", "bob", "--ntfy-topic", "bad/topic", "--db", db)
    assert code == 2 and "ntfy topic" in err
    code, _, _ = run("reviewers", "link", "bob", "--ntfy-topic", TOPIC, "--db", db)
    assert code != 0 and _identity(db, "bob") == "bob-Kp9mN4vB7cX1"


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--ntfy-url", "ntfy.sh"], {}),
        (["--ntfy-url", "https://user:cli-secret-7@ntfy.sh"], {}),
        (["--ntfy-url", "http://push.example"], {"APPROVAL_GUARD_NTFY_TOKEN": "cli-secret-7"}),
        (["--ntfy-url", "https://ntfy.sh"], {"APPROVAL_GUARD_NTFY_TOKEN": "cli secret-7"}),
    ],
    ids=["no-scheme", "password-in-url", "token-in-clear", "bad-token"],
)
def test_serve_refuses_a_bad_ntfy_setup(
    db: str, argv: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 2 before binding, with a message that never quotes the token."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = run(
        "serve", "--db", db, "--port", "0", "--public-url", "https://a.example", *argv
    )
    assert code == 2, out + err
    assert "ntfy" in err and "cli-secret-7" not in out + err and "cli secret-7" not in out + err


def test_serve_pushes_to_a_linked_topic_and_its_button_decides(tmp_path: Path) -> None:
    """``serve --ntfy-url`` alone: alice's phone gets the push; its Approve posts back to serve."""
    db = str(tmp_path / "provider.sqlite3")
    assert run("reviewers", "add", "alice", "--role", "payments", "--db", db)[0] == 0
    assert run("reviewers", "link", "alice", "--ntfy-topic", TOPIC, "--db", db)[0] == 0
    instance = "agi_" + secrets.token_urlsafe(24)
    port = free_port()
    with FakeNtfy() as ntfy:
        argv = ["serve", "--db", db, "--port", str(port), "--instance-token", instance]
        process = subprocess.Popen(
            [sys.executable, "-m", "approval_guard", *argv, "--ntfy-url", ntfy.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**subprocess_env(), "APPROVAL_GUARD_NTFY_TOKEN": TOKEN},
        )
        try:
            assert process.stdout is not None
            url = None
            for line in process.stdout:
                found = re.search(r"listening on (\S+)", line)
                if found:
                    url = found.group(1)
                    break
            assert url == f"http://127.0.0.1:{port}"
            created = Api(url, instance).new(tool="issue_refund")
            [push] = ntfy.wait_accepted(1, TOPIC)
            approve = push.action("Approve")["url"]
            assert approve.startswith(f"{url}/ntfy/requests/{created['id']}/decision?token=")
            assert ntfy.tap(push, "Approve").status == 200
            assert Api(url, instance).poll(created["id"]).json()["status"] == "approved"
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=15)
    assert TOKEN not in out + err
