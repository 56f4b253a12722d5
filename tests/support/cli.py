"""Running the ``approval-guard`` command line in-process or as a child, and its requests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from typing import Any

import pytest
import requests

from approval_guard import _env
from approval_guard.cli import main
from approval_guard.testing import LocalProvider
from tests.support.paths import REPO

ENV_NAMES = (_env.ENV_URL, _env.ENV_REVIEWER_TOKEN, _env.ENV_CREDENTIAL)


def create(
    provider: LocalProvider,
    *,
    tool: str = "issue_refund",
    arguments: dict[str, Any] | None = None,
    timeout: str = "30m",
    **extra: Any,
) -> str:
    """Create a request as the adapter would (instance credential); return its id.

    ``extra``: more create fields (API 1.3's ``batch`` and ``context``).
    """
    body = {
        "tool": tool,
        "arguments": {"payment_id": "payment_123", "amount": 4900}
        if arguments is None
        else arguments,
        "timeout": timeout,
        **extra,
    }
    response = requests.post(
        f"{provider.url}/v1/requests",
        json=body,
        headers={
            "Authorization": f"Bearer {provider.credential}",
            "Idempotency-Key": str(uuid.uuid4()),
        },
        timeout=5,
    )
    assert response.status_code == 201, response.text
    request_id: str = response.json()["id"]
    return request_id


def read(provider: LocalProvider, request_id: str) -> dict[str, Any]:
    """The request's current wire state, read with the instance credential."""
    response = requests.get(
        f"{provider.url}/v1/requests/{request_id}",
        headers={"Authorization": f"Bearer {provider.credential}"},
        timeout=5,
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def run(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider | None, *argv: str
) -> tuple[int, str, str]:
    """``main(argv)`` in-process with the reviewer connection; (exit code, stdout, stderr)."""
    connection = (
        ["--url", provider.url, "--token", provider.reviewer_credential] if provider else []
    )
    code = main([*argv, *connection])
    out, err = capsys.readouterr()
    return code, out, err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m approval_guard ...`` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "approval_guard", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=subprocess_env(),
        cwd=REPO,
    )
