"""``serve --webhook ...`` on the command line, the bare runner's flags, and ``webhooks list``."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from approval_guard.cli import main
from approval_guard.cli._parser import build_parser
from approval_guard.provider import Store
from approval_guard.provider.channels.webhooks.channel import WebhooksChannel
from approval_guard.provider.channels.webhooks.settings import targets_from_args, webhook_settings
from approval_guard.provider.channels.webhooks.signing import (
    WebhookTarget,
    display_url,
    new_secret,
    parse_secret,
    verify,
)
from tests.support.api import Api
from tests.support.paths import REPO
from tests.support.webhook_receiver import Receiver

SECRET = new_secret()


def test_each_secret_and_format_belongs_to_the_webhook_before_it() -> None:
    """``--webhook A --webhook-secret S --webhook B --webhook-format slack``: A signed, B slack."""
    args = build_parser({}).parse_args(
        [
            "serve",
            "--webhook",
            "https://a.example/hook",
            "--webhook-secret",
            SECRET,
            "--webhook",
            "http://b.example/hook",
            "--webhook-format",
            "slack",
            "--public-url",
            "https://review.example/",
        ]
    )
    assert (
        WebhookTarget("https://a.example/hook", parse_secret(SECRET), "standard"),
        WebhookTarget("http://b.example/hook", None, "slack"),
    ) == targets_from_args(args)
    assert "https://review.example" == args.public_url


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--webhook-secret", SECRET], "must follow the --webhook"),
        (["--webhook-format", "slack"], "must follow the --webhook"),
        (["--webhook", "ftp://a.example/"], "http(s)"),
        (["--webhook", "https://a.example/", "--webhook-secret", "whsec_%%%"], "base64"),
        (["--webhook", "https://a.example/", "--webhook-secret", "sk_" + SECRET[6:]], "whsec_"),
        (["--webhook", "https://a.example/", "--webhook-format", "teams"], "standard, slack"),
        (["--webhook", "https://a.example/", "--webhook", "https://a.example/"], "twice"),
        (
            ["--webhook", "https://a.example/", "--webhook-secret", SECRET] * 1
            + ["--webhook-secret", SECRET],
            "one --webhook-secret",
        ),
        (["--public-url", "review.example"], "http(s)"),
    ],
)
def test_a_bad_webhook_option_is_a_usage_error_without_the_secret(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Exit 2 before anything starts, saying why; a secret never appears in the message."""
    code = main(["serve", "--db", str(tmp_path / "a.db"), "--port", "0", *argv])
    err = capsys.readouterr().err
    assert 2 == code
    assert says in err
    assert SECRET[6:] not in err and "%%%" not in err
    assert not (tmp_path / "a.db").exists()


def _outbox_with_attempts(db: Path) -> str:
    store = Store(str(db))
    try:
        target = WebhookTarget("https://hooks.example/in?token=hidden")
        settings = webhook_settings([target], None, 5.0, 3600.0, None)
        store.set_channels([WebhooksChannel(settings)])
        tokens = store.ensure_initial_credentials()
        assert tokens is not None
        owner = store.authenticate(tokens.instance)
        assert owner is not None
        request = store.create_request(
            owner=owner, idempotency_key="k", tool="t", arguments={}, timeout_seconds=60
        ).request
        (item,) = store.claim_outbox(
            owner="me", per_target={"webhooks": 4}, busy={}, limit=5, lease=30
        )
        later = store.now()
        assert store.settle_outbox(
            item.id,
            owner="me",
            attempt=1,
            at=later,
            status_code=502,
            error=None,
            state="pending",
            next_attempt_at=later,
        )
        return request.id
    finally:
        store.close()


def test_webhooks_list_shows_each_event_and_its_attempts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table: event, request, URL without its query, state, attempts, result, next attempt."""
    db = tmp_path / "a.db"
    request_id = _outbox_with_attempts(db)

    assert 0 == main(["webhooks", "list", "--db", str(db)])
    out = capsys.readouterr().out
    header, row = out.splitlines()
    assert "EVENT REQUEST URL STATE ATTEMPTS LAST RESULT NEXT ATTEMPT" == " ".join(header.split())
    cells = row.split()
    shown = display_url("https://hooks.example/in?token=hidden")
    assert ["request.created", request_id, shown, "pending", "1"] == cells[:5]
    assert ["HTTP", "502"] == cells[5:7] and cells[7].endswith("Z")
    assert "hidden" not in out

    assert 0 == main(["webhooks", "list", "--db", str(db), "--json"])
    (listed,) = json.loads(capsys.readouterr().out)["webhooks"]
    assert [502] == [attempt["status_code"] for attempt in listed["history"]]
    assert ("pending", 1, "HTTP 502") == (
        listed["state"],
        listed["attempts"],
        listed["last_result"],
    )


def test_webhooks_list_of_a_missing_file_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped path is an error, not a new empty database."""
    assert 1 == main(["webhooks", "list", "--db", str(tmp_path / "nope.db")])
    assert "no such database file" in capsys.readouterr().err
    assert not (tmp_path / "nope.db").exists()


def test_the_bare_runner_takes_the_webhook_flags(tmp_path: Path) -> None:
    """The bare provider process takes ``--webhook ... --webhook-secret ...`` and posts."""
    token = "agi_" + secrets.token_urlsafe(24)
    with Receiver() as hook:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "approval_guard.provider.serving.process",
                "--db",
                str(tmp_path / "a.db"),
                "--instance-token",
                token,
                "--webhook",
                hook.url,
                "--webhook-secret",
                SECRET,
                "--public-url",
                "https://review.example",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            assert process.stdout is not None
            url = json.loads(process.stdout.readline())["url"]
            made = Api(url, token).new()
            (delivery,) = hook.wait_count(1)
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=20)
    verify(SECRET, delivery.headers, delivery.body)
    assert made["id"] == delivery.json["data"]["id"]
    assert f"https://review.example/?request={made['id']}" == delivery.json["data"]["url"]
    assert SECRET[6:] not in err
