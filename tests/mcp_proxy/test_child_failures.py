"""A child MCP server that misbehaves: the proxy answers honestly, logs one line, and ends."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support.frameworks import require_framework

require_framework("mcp")

import anyio  # noqa: E402
import pytest  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from approval_guard.testing import LocalProvider  # noqa: E402
from tests.support.mcp_proxy import RAW_CHILD, proxied, proxy_command, proxy_env  # noqa: E402
from tests.support.paths import REPO  # noqa: E402


def test_a_malformed_tool_list_is_an_mcp_error_and_one_log_line(
    provider: LocalProvider, tmp_path: Path
) -> None:
    """The child's tools/list is not MCP's shape: the proxy stays up, the client gets an error."""
    errors = tmp_path / "stderr.txt"

    async def use() -> tuple[str, Any]:
        with errors.open("w", encoding="utf-8") as errlog:
            child = [*RAW_CHILD, "bad-tools-list"]
            async with proxied(provider, ["--guard", "*"], child, errlog) as client:
                with pytest.raises(MCPError) as listing:
                    await client.list_tools()
                called = await client.call_tool("anything", {"a": 1})
        return str(listing.value), called

    listing, called = anyio.run(use)

    assert "tools/list answer could not be read" in listing
    assert called.is_error  # an unknown tool: never passed on, nobody asked
    assert [] == provider.requests()
    logged = errors.read_text(encoding="utf-8")
    assert "Traceback" not in logged
    assert 1 <= logged.count("tools/list answer could not be read") <= 2, logged
    assert all(len(line) < 400 for line in logged.splitlines())


def test_a_child_that_never_answers_initialize_stops_the_proxy_in_bounded_time(
    provider: LocalProvider,
) -> None:
    """No answer to initialize within --start-timeout: the proxy says so and exits 1."""
    command = proxy_command(["--guard", "*", "--start-timeout", "1s"], [*RAW_CHILD, "silent"])
    # stdin stays open, as a client that does not go away: only the bound can end the proxy.
    proxy = subprocess.Popen(
        command,
        env=proxy_env(provider),
        cwd=str(REPO),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        code = proxy.wait(timeout=60)
        assert proxy.stderr is not None
        stderr = proxy.stderr.read()
    finally:
        proxy.kill()
        proxy.wait()
        for stream in (proxy.stdin, proxy.stdout, proxy.stderr):
            if stream is not None:
                stream.close()

    assert 1 == code, stderr
    assert "did not answer MCP's initialize within 1s" in stderr
    assert "Traceback" not in stderr
