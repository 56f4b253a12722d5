"""Discord on the command line: ``serve --discord-...``, ``reviewers link --discord-user``."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from approval_guard.provider import Store
from tests.cli.test_reviewers import run
from tests.support import fake_discord
from tests.support.api import Api
from tests.support.cli import subprocess_env
from tests.support.fake_discord import CHANNEL, TOKEN, FakeDiscord

ALICE = "80351110224678912"


def linked(db: str, user: str) -> str | None:
    store = Store(db)
    try:
        found = store.reviewer_by_identity("discord", user)
        return None if found is None else found.name
    finally:
        store.close()


def test_reviewers_link_takes_a_discord_user_id_by_flag_or_channel(tmp_path: Path) -> None:
    """``--discord-user ID`` and ``--channel discord:ID`` link; a relink moves the reviewer."""
    db = str(tmp_path / "p.sqlite3")
    assert run("reviewers", "add", "alice", "--role", "payments", "--db", db)[0] == 0
    assert run("reviewers", "link", "alice", "--discord-user", ALICE, "--db", db)[0] == 0
    assert linked(db, ALICE) == "alice"
    assert run("reviewers", "link", "alice", "--channel", "discord:123", "--db", db)[0] == 0
    assert (linked(db, ALICE), linked(db, "123")) == (None, "alice")
    assert run("reviewers", "add", "bob", "--discord-user", ALICE, "--db", db)[0] == 0
    assert linked(db, ALICE) == "bob"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["reviewers", "link", "alice", "--discord-user", "@alice"], "Discord user id"),
        (["reviewers", "link", "alice", "--channel", "discord:12x"], "Discord user id"),
        (["reviewers", "link", "nobody", "--discord-user", "42"], "no live reviewer"),
        (["reviewers", "add", "carol", "--discord-user", ALICE], "already linked"),
    ],
)
def test_a_bad_discord_link_is_refused_and_changes_nothing(
    tmp_path: Path, argv: list[str], says: str
) -> None:
    """A malformed id, an unknown reviewer, another's id: exit 2 or 1, saying why, no change."""
    db = str(tmp_path / "p.sqlite3")
    assert run("reviewers", "add", "alice", "--discord-user", ALICE, "--db", db)[0] == 0
    code, out, err = run(*argv, "--db", db)
    assert code != 0
    assert says in out + err
    assert linked(db, ALICE) == "alice"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--discord-channel", CHANNEL], "--discord-bot-token"),
        (["--discord-channel", CHANNEL, "--discord-bot-token", TOKEN], "--discord-public-key"),
        (["--discord-bot-token", TOKEN], "needs --discord-channel"),
        (
            [
                "--discord-channel",
                CHANNEL,
                "--discord-bot-token",
                TOKEN,
                "--discord-public-key",
                "not-a-key",
            ],
            "public key",
        ),
        (
            [
                "--discord-channel",
                CHANNEL,
                "--discord-bot-token",
                TOKEN + " " + TOKEN,
                "--discord-public-key",
                "ab" * 32,
            ],
            "bot token",
        ),
    ],
)
def test_a_bad_discord_option_stops_serve_without_the_token(
    argv: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 2 before anything starts, saying why; the token never appears in the message."""
    monkeypatch.delenv("APPROVAL_GUARD_DISCORD_BOT_TOKEN", raising=False)
    monkeypatch.delenv("APPROVAL_GUARD_DISCORD_PUBLIC_KEY", raising=False)
    code, out, err = run("serve", "--db", str(tmp_path / "a.db"), "--port", "0", *argv)
    assert code == 2, out + err
    assert says in err
    assert TOKEN not in out + err
    assert not (tmp_path / "a.db").exists()


def test_serve_posts_to_discord_and_a_signed_click_approves(tmp_path: Path) -> None:
    """A real ``serve`` (secrets in its environment) posts the request; alice's click decides."""
    db = str(tmp_path / "p.sqlite3")
    assert run("reviewers", "add", "alice", "--role", "payments", "--db", db)[0] == 0
    assert run("reviewers", "link", "alice", "--discord-user", ALICE, "--db", db)[0] == 0
    with FakeDiscord() as discord:
        env = {
            **subprocess_env(),
            "APPROVAL_GUARD_DISCORD_BOT_TOKEN": TOKEN,
            "APPROVAL_GUARD_DISCORD_PUBLIC_KEY": discord.public_key,
        }
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
                "--discord-channel",
                CHANNEL,
                "--discord-api-url",
                discord.api_url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert process.stdout is not None
            lines = []
            for line in process.stdout:
                lines.append(line)
                if "Ctrl-C" in line:
                    break
            banner = "".join(lines)
            url = re.search(r"listening on (http://\S+)", banner)
            credential = re.search(r"instance credential .*: (agi_\S+)", banner)
            assert url is not None and credential is not None, banner
            made = Api(url.group(1), credential.group(1)).new()
            message = discord.wait_message(lambda m: True)
            answer = discord.post(
                f"{url.group(1)}/discord/interactions",
                fake_discord.click(ALICE, message, fake_discord.button(message, "Approve")),
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["type"] == 7
            discord.wait_message(lambda m: m["components"] == [])
            bad = discord.post(
                f"{url.group(1)}/discord/interactions", {"type": 1}, signature="0" * 128
            )
            assert bad.status_code == 401
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=20)
    assert made["id"] in message["content"]
    for text in (banner, out, err):
        assert TOKEN not in text
