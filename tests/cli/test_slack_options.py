"""``serve --slack-...``: the options and their environment variables, a real ``serve`` process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from approval_guard.cli import main
from approval_guard.cli._parser import build_parser
from approval_guard.provider.channels.slack.settings import settings_from_args
from tests.support.api import Api
from tests.support.cli import subprocess_env
from tests.support.fake_slack import SIGNING_SECRET, TOKEN, FakeSlack
from tests.support.slack_clicks import CHANNEL

ENV = {
    "APPROVAL_GUARD_SLACK_BOT_TOKEN": TOKEN,
    "APPROVAL_GUARD_SLACK_SIGNING_SECRET": SIGNING_SECRET,
}


def test_the_secrets_come_from_the_environment() -> None:
    """With both secrets in the environment, ``--slack-channel`` alone turns Slack on."""
    args = build_parser(ENV).parse_args(["serve", "--slack-channel", CHANNEL])
    made = settings_from_args(args)
    assert made is not None
    assert (TOKEN, SIGNING_SECRET, CHANNEL) == (made.bot_token, made.signing_secret, made.channel)
    assert "https://slack.com/api/" == made.api_url


def test_secrets_in_the_environment_alone_leave_slack_off() -> None:
    """No channel anywhere: no Slack, even with the secrets set."""
    assert settings_from_args(build_parser(ENV).parse_args(["serve"])) is None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--slack-channel", CHANNEL], "--slack-bot-token"),
        (["--slack-channel", CHANNEL, "--slack-bot-token", TOKEN], "--slack-signing-secret"),
        (
            [
                "--slack-channel",
                "general",
                "--slack-bot-token",
                TOKEN,
                "--slack-signing-secret",
                SIGNING_SECRET,
            ],
            "channel",
        ),
        (
            [
                "--slack-channel",
                CHANNEL,
                "--slack-bot-token",
                "secret-but-wrong-x",
                "--slack-signing-secret",
                SIGNING_SECRET,
            ],
            "starting xox",
        ),
        (["--slack-api-url", "http://127.0.0.1:9/api/"], "needs --slack-channel"),
    ],
)
def test_a_bad_slack_option_is_a_usage_error_without_the_secret(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Exit 2 before anything starts, saying why; a secret never appears in the message."""
    code = main(["serve", "--db", str(tmp_path / "a.db"), "--port", "0", *argv])
    err = capsys.readouterr().err
    assert 2 == code
    assert says in err
    assert TOKEN not in err and SIGNING_SECRET not in err and "secret-but-wrong" not in err
    assert not (tmp_path / "a.db").exists()


def test_serve_posts_to_slack_and_never_prints_a_secret(tmp_path: Path) -> None:
    """A real ``serve`` with the secrets in its environment posts a new request to Slack."""
    with FakeSlack() as slack:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "approval_guard",
                "serve",
                "--db",
                str(tmp_path / "p.sqlite3"),
                "--port",
                "0",
                "--slack-channel",
                CHANNEL,
                "--slack-api-url",
                slack.api_url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**subprocess_env(), **ENV},
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
            Api(url.group(1), credential.group(1)).new()
            (call,) = slack.wait_calls("chat.postMessage")
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=20)
    assert f"Bearer {TOKEN}" == call.headers["authorization"]
    assert "/slack/interactions" in banner
    for text in (banner, out, err):
        assert TOKEN not in text and SIGNING_SECRET not in text


def test_the_demo_posts_its_request_to_slack_and_updates_it(tmp_path: Path) -> None:
    """``demo --slack-channel C --slack-api-url URL --decide approve``: posted, then approved."""
    with FakeSlack() as slack:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "approval_guard",
                "demo",
                "--decide",
                "approve",
                "--after",
                "1s",
                "--slack-channel",
                CHANNEL,
                "--slack-user",
                "U0ME",
                "--slack-api-url",
                slack.api_url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**subprocess_env(), **ENV},
        )
        assert 0 == done.returncode, done.stdout + done.stderr
        (posted,) = slack.of("chat.postMessage")
        updates = slack.of("chat.update")
    assert "`issue_refund`" in posted.body["text"]
    assert any("Approved" in str(call.body["text"]) for call in updates), updates
    assert TOKEN not in done.stdout + done.stderr and SIGNING_SECRET not in done.stdout
