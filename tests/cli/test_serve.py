"""``approval-guard serve``: credentials printed on the first start only, a busy port one
clear line.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import requests

from tests.support.cli import cli, subprocess_env


def _serve(db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "approval_guard", "serve", "--db", str(db), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )


def _read_until(process: subprocess.Popen[str], marker: str) -> str:
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            break
    return "".join(lines)


def _stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=15)
    return process.returncode, out


def test_serve_prints_credentials_on_first_start_only(tmp_path: Path) -> None:
    """First start prints URL, instance credential and reviewer URL; a restart does not."""
    db = tmp_path / "approvals.sqlite3"

    first = _serve(db)
    try:
        banner = _read_until(first, "Ctrl-C")
        url = banner.split("listening on ", 1)[1].split()[0]
        reviewer = banner.split(f"{url}/?token=", 1)[1].split()[0]
        instance = banner.split("APPROVAL_GUARD_CREDENTIAL): ", 1)[1].split()[0]
        # The printed credentials work: the instance creates, the reviewer lists.
        response = requests.post(
            f"{url}/v1/requests",
            json={"tool": "t", "arguments": {}, "timeout": "1m"},
            headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": "k1"},
            timeout=5,
        )
        assert 201 == response.status_code
        listed = cli("list", "--url", url, "--token", reviewer)
        assert response.json()["id"] in listed.stdout
    finally:
        code, rest = _stop(first)
    assert 0 == code
    assert "provider stopped" in rest

    second = _serve(db)
    try:
        banner = _read_until(second, "Ctrl-C")
    finally:
        code, _ = _stop(second)
    assert 0 == code
    assert "printed when this database was first started" in banner
    assert reviewer not in banner
    assert instance not in banner


def test_serve_on_a_busy_port_fails_with_exit_1(tmp_path: Path) -> None:
    """A port already in use is a one-line error, not a traceback."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = cli("serve", "--db", str(tmp_path / "a.sqlite3"), "--port", str(port))

    assert 1 == done.returncode
    assert "cannot listen on 127.0.0.1" in done.stderr
    assert "Traceback" not in done.stderr
