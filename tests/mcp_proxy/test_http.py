"""The streamable-HTTP variant: --listen HOST:PORT serves the same relay on http://HOST:PORT/mcp."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture
def http_proxy(provider: LocalProvider, record: Path) -> Iterator[str]:
    """The proxy serving streamable HTTP on a free port before the recording server: its URL."""
    port = free_port()
    command = proxy_command(
        ["--guard", "write_*", "--listen", f"127.0.0.1:{port}"], [*RECORDER, str(record)]
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
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.communicate()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the proxy never listened"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert 0 == process.returncode, err


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
