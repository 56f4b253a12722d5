"""Adversarial review of the local provider, its CLI and what a reviewer is shown.

Everything here runs over real HTTP against the real local provider.
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from approval_guard import _env
from approval_guard.cli import main
from approval_guard.testing import LocalProvider
from tests.support.api import create_from_text


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own APPROVAL_GUARD_* variables must not leak into these tests."""
    for name in (_env.ENV_URL, _env.ENV_REVIEWER_TOKEN, _env.ENV_CREDENTIAL):
        monkeypatch.delenv(name, raising=False)


def raw_exchange(provider: LocalProvider, data: bytes) -> tuple[str, bytes]:
    """Send bytes as they are; return the status line and the body the provider answered."""
    parts = urlsplit(provider.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.connect()
        assert conn.sock is not None
        conn.sock.sendall(data)
        chunks = []
        while chunk := conn.sock.recv(65536):  # these exchanges end with Connection: close
            chunks.append(chunk)
    finally:
        conn.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n")[0], body


def create_raw(provider: LocalProvider, arguments_json: str, *, tool: str = "transfer") -> str:
    """Create a request from JSON text (numbers Python cannot write); return its id."""
    body = f'{{"tool":{json.dumps(tool)},"arguments":{arguments_json},"timeout":"30m"}}'
    request_id = create_from_text(provider, body)
    return request_id




@pytest.mark.parametrize(
    "target",
    ["http://[/v1/requests", "http://x]/v1/requests", "http://[::1/v1/events?after=1"],
)
def test_a_request_target_that_is_no_url_gets_a_json_400(
    provider: LocalProvider, target: str
) -> None:
    """A target urlsplit cannot parse is a 400 in the API's error shape, not a dropped line."""
    token = provider.reviewer_credential
    status, body = raw_exchange(
        provider,
        f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n".encode(),
    )

    assert status.startswith("HTTP/1.1 400 ")
    assert "invalid_request" == json.loads(body)["error"]["type"]
    listed = requests.get(
        f"{provider.url}/v1/requests", headers={"Authorization": f"Bearer {token}"}, timeout=5
    )
    assert 200 == listed.status_code




def run(capsys: pytest.CaptureFixture[str], provider: LocalProvider, *argv: str) -> tuple[int, str]:
    """``approval-guard ARGV`` in-process as the reviewer; (exit code, stdout + stderr)."""
    code = main([*argv, "--url", provider.url, "--token", provider.reviewer_credential])
    out, err = capsys.readouterr()
    return code, out + err


ODD_NUMBERS = (
    '{"huge":1e400,"minus_zero":-0,"big":9007199254740993,"upper":1E5,"long":' + ("7" * 700) + "}"
)


def test_list_json_prints_exact_numbers_in_ascii(
    provider: LocalProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list --json`` writes numbers as stored (no crash on 1e400) and hidden text as escapes."""
    request_id = create_raw(provider, ODD_NUMBERS, tool="pay\u202eusd")

    code, out = run(capsys, provider, "list", "--json")

    assert 0 == code, out
    assert out.isascii()
    for text in (
        '"huge": 1e400',
        '"minus_zero": -0',
        '"big": 9007199254740993',
        '"upper": 1E5',
        '"long": ' + "7" * 700,
        '"tool": "pay\\u202eusd"',
    ):
        assert text in out
    assert [request_id] == [item["id"] for item in json.loads(out)]


def nested_arguments(depth: int) -> str:
    """An arguments object nesting ``depth`` levels in all (the object itself is level 1)."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("command", ["list", "show"])
def test_the_cli_reads_arguments_as_deep_as_the_provider_accepts(
    provider: LocalProvider, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A request nested to the provider's limit does not make list or show unreadable."""
    from approval_guard._codec.exact_json import MAX_JSON_DEPTH

    request_id = create_raw(provider, nested_arguments(MAX_JSON_DEPTH))
    argv = ["list"] if command == "list" else ["show", request_id]

    code, out = run(capsys, provider, *argv)

    assert 0 == code, out
    assert request_id in out


def test_list_shows_an_old_pending_request_behind_a_full_page_of_newer_ones(
    provider: LocalProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list`` follows the provider's pages: 1,000 newer requests do not hide an old one."""
    old = create_raw(provider, '{"payment_id":"p_old"}', tool="issue_refund")
    store = provider.store
    owner = store.authenticate(provider.credential)
    assert owner is not None
    for i in range(1000):
        store.create_request(
            owner=owner,
            idempotency_key=f"bulk-{i}",
            tool="noop",
            arguments={"i": i},
            timeout_seconds=1800,
        )

    code, out = run(capsys, provider, "list", "--status", "pending")

    assert 0 == code, out
    assert old in out
    assert 1001 == sum(1 for line in out.splitlines() if " pending " in line)


def test_list_ends_when_a_hostile_provider_cursor_loops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A provider answering the same page with ever new cursors does not hang ``list``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    page = {
        "requests": [
            {
                "id": "r1",
                "tool": "noop",
                "arguments": {},
                "timeout": "30m",
                "status": "pending",
                "created_at": "2026-09-16T12:00:00Z",
                "deadline_at": "2099-09-16T12:30:00Z",
            }
        ],
    }
    calls: list[str] = []

    class Looping(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            calls.append(self.path)
            # The cursor alternates, so it never repeats the one just sent; after
            # 50 pages it stops, so that a CLI without the guard still ends.
            answer = {**page, "next_before": f"c{len(calls) % 2}"} if len(calls) < 50 else {}
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Looping)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code = main(["list", "--url", url, "--token", "agr_x"])
    finally:
        server.shutdown()
        server.server_close()
    out, err = capsys.readouterr()

    assert 0 == code, err
    assert 1 == out.count("r1")
    assert 2 == len(calls)
