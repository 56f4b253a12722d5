"""The streamable-HTTP variant: --listen HOST:PORT serves the same relay on http://HOST:PORT/mcp."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.api import wait_for
from tests.support.frameworks import require_framework

require_framework("mcp")

import anyio  # noqa: E402
import pytest  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402
from tests.support.cli import free_port  # noqa: E402
from tests.support.mcp_proxy import RECORDER, proxy_command, proxy_env, recorded, text_of  # noqa: E402
from tests.support.paths import REPO  # noqa: E402


@contextmanager
def _listening(provider: LocalProvider, record: Path, host: str) -> Iterator[str]:
    """The proxy serving streamable HTTP on ``host`` and a free port: its URL."""
    port = free_port()
    command = proxy_command(
        ["--guard", "write_*", "--listen", f"{host}:{port}"], [*RECORDER, str(record)]
    )
    process = subprocess.Popen(
        command,
        env=proxy_env(provider),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def listening() -> bool:
            assert process.poll() is None, process.communicate()
            try:
                socket.create_connection((host.strip("[]"), port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_for(listening, timeout=30, what="the proxy never listened")
        yield f"http://{host}:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert 0 == process.returncode, err


@pytest.fixture
def http_proxy(provider: LocalProvider, record: Path) -> Iterator[str]:
    """The proxy serving streamable HTTP on 127.0.0.1 before the recording server: its URL."""
    with _listening(provider, record, "127.0.0.1") as url:
        yield url


def _session_calls(url: str, *calls: tuple[str, dict[str, Any]]) -> tuple[list[str], list[Any]]:
    async def run() -> tuple[list[str], list[Any]]:
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            names = [tool.name for tool in (await client.list_tools()).tools]
            return names, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def test_the_http_proxy_lists_and_guards(
    provider: LocalProvider, record: Path, http_proxy: str
) -> None:
    """Over HTTP: the child's tools, an approved call run once, an unguarded one unasked."""
    provider.policy = approve_after(0.1)
    names, [written, read] = _session_calls(
        http_proxy, ("write_note", {"name": "a", "text": "b"}), ("read_notes", {})
    )
    assert ["write_note", "delete_note", "read_notes"] == names
    assert not written.is_error and not read.is_error
    assert ["write_note", "read_notes"] == [call["tool"] for call in recorded(record)]
    assert ["write_note"] == [request.tool for request in provider.requests()]


def test_the_http_proxy_says_why_a_denied_call_did_not_run(
    provider: LocalProvider, record: Path, http_proxy: str
) -> None:
    """Over HTTP a denial is an isError result with the sentence; the tool never ran."""
    provider.policy = deny_after(0.1, "no")
    _, [result] = _session_calls(http_proxy, ("write_note", {"name": "a", "text": "b"}))
    assert result.is_error
    assert text_of(result).startswith("A person denied this call to write_note: no.")
    assert [] == recorded(record)


_INITIALIZE = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
    b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}}'
)


@pytest.mark.parametrize(
    ("host", "own"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.2", "127.0.0.2"),
        ("[::1]", "[::1]"),
        # An IPv4-mapped loopback address listens on the IPv4 address it stands for.
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
    ],
)
def test_a_request_for_another_host_name_is_refused_on_any_loopback_address(
    provider: LocalProvider, record: Path, host: str, own: str
) -> None:
    """DNS rebinding: a Host header that is not the loopback address is 421, on 127.0.0.2 too."""
    with _listening(provider, record, host) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        answers = {}
        for name in (f"{own}:{port}", f"evil.example:{port}"):
            with socket.create_connection((host.strip("[]"), port), timeout=10) as conn:
                conn.sendall(
                    b"POST /mcp HTTP/1.1\r\nHost: " + name.encode() + b"\r\n"
                    b"Content-Type: application/json\r\n"
                    b"Accept: application/json, text/event-stream\r\n"
                    b"Content-Length: " + str(len(_INITIALIZE)).encode() + b"\r\n"
                    b"Connection: close\r\n\r\n" + _INITIALIZE
                )
                answers[name] = conn.recv(64).split(b" ")[1]
    assert [b"200", b"421"] == list(answers.values())
