"""``serve --instance-token T --reviewer-token T`` (or the environment); no plain HTTP off loopback.

Each test runs the real ``approval-guard serve`` in a child process and talks to it over HTTP.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from approval_guard._env import ENV_SERVE_INSTANCE_TOKEN, ENV_SERVE_REVIEWER_TOKEN
from tests.support.cli import cli, subprocess_env

INSTANCE = "agi_known-instance-token-for-ci-0001"
REVIEWER = "agr_known-reviewer-token-for-ci-0001"


def serve(db: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "approval_guard", "serve", "--db", str(db), "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**subprocess_env(), **(env or {})},
    )


def banner(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "Ctrl-C" in line:
            break
    return "".join(lines)


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=15)
    assert 0 == process.returncode, err
    return out


def works(url: str, instance: str, reviewer: str) -> None:
    created = requests.post(
        f"{url}/v1/requests",
        json={"tool": "t", "arguments": {}, "timeout": "1m"},
        headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": uuid.uuid4().hex},
        timeout=5,
    )
    assert 201 == created.status_code, created.text
    listed = requests.get(
        f"{url}/v1/requests",
        headers={"Authorization": f"Bearer {reviewer}"},
        timeout=5,
    )
    assert 200 == listed.status_code, listed.text


@pytest.mark.parametrize("how", ["flags", "environment"])
def test_known_tokens_are_the_credentials_of_a_new_database(tmp_path: Path, how: str) -> None:
    db = tmp_path / "a.sqlite3"
    if how == "flags":
        process = serve(db, "--instance-token", INSTANCE, "--reviewer-token", REVIEWER)
    else:
        env = {ENV_SERVE_INSTANCE_TOKEN: INSTANCE, ENV_SERVE_REVIEWER_TOKEN: REVIEWER}
        process = serve(db, env=env)
    try:
        text = banner(process)
        url = text.split("listening on ", 1)[1].split()[0]
        assert INSTANCE not in text and REVIEWER not in text  # never printed
        works(url, INSTANCE, REVIEWER)
    finally:
        stop(process)
    # A restart with the same tokens serves the same database.
    again = serve(db, "--instance-token", INSTANCE, "--reviewer-token", REVIEWER)
    try:
        url = banner(again).split("listening on ", 1)[1].split()[0]
        works(url, INSTANCE, REVIEWER)
    finally:
        stop(again)


def test_a_token_that_is_not_this_databases_refuses_to_start(tmp_path: Path) -> None:
    db = tmp_path / "a.sqlite3"
    first = serve(db)
    try:
        banner(first)
    finally:
        stop(first)
    done = cli("serve", "--db", str(db), "--port", "0", "--instance-token", INSTANCE)
    assert 1 == done.returncode
    assert "not a live instance credential of this database" in done.stderr
    assert INSTANCE not in done.stderr


@pytest.mark.parametrize("token", ["short", "has a space in it somewhere ok", "é" * 30])
def test_a_bad_token_is_refused_without_showing_it(tmp_path: Path, token: str) -> None:
    done = cli(
        "serve", "--db", str(tmp_path / "a.sqlite3"), "--port", "0", "--reviewer-token", token
    )
    assert 1 == done.returncode
    assert "24 to 512 printable ASCII" in done.stderr
    assert token not in done.stderr


@pytest.mark.parametrize("host", ["[::1]", "::1"])
def test_plain_http_on_ipv6_loopback_needs_no_insecure_http(tmp_path: Path, host: str) -> None:
    """``--host [::1]`` (as in a URL) or ``::1``: loopback, served on http://[::1]:PORT."""
    tokens = ("--instance-token", INSTANCE, "--reviewer-token", REVIEWER)
    process = serve(tmp_path / "a.sqlite3", "--host", host, *tokens)
    try:
        url = banner(process).split("listening on ", 1)[1].split()[0]
        assert url.startswith("http://[::1]:"), url
        works(url, INSTANCE, REVIEWER)
    finally:
        stop(process)


def test_plain_http_on_a_v4_mapped_address_elsewhere_is_refused(tmp_path: Path) -> None:
    """``[::ffff:10.0.0.1]`` is another machine's address: plain HTTP needs --insecure-http."""
    done = cli(
        "serve", "--db", str(tmp_path / "a.sqlite3"), "--host", "[::ffff:10.0.0.1]", "--port", "0"
    )
    assert 1 == done.returncode
    assert "refusing to serve plain HTTP on 10.0.0.1" in done.stderr


def test_plain_http_off_loopback_needs_insecure_http(tmp_path: Path) -> None:
    done = cli("serve", "--db", str(tmp_path / "a.sqlite3"), "--host", "0.0.0.0", "--port", "0")
    assert 1 == done.returncode
    assert "refusing to serve plain HTTP on 0.0.0.0" in done.stderr
    assert "--insecure-http" in done.stderr
    process = serve(tmp_path / "b.sqlite3", "--host", "0.0.0.0", "--insecure-http")
    try:
        text = banner(process)
        assert "listening on" in text
    finally:
        stop(process)
