"""Running ``approval-guard mcp-proxy`` as a real subprocess and talking MCP to it over stdio."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from approval_guard.testing import LocalProvider
from tests.support.paths import REPO

#: The recording MCP server (tests/support/mcp_recorder.py) writing to FILE: its command.
RECORDER = (sys.executable, "-m", "tests.support.mcp_recorder")
#: A server that misbehaves as its MODE says (tests/support/mcp_raw_child.py): its command.
RAW_CHILD = (sys.executable, "-m", "tests.support.mcp_raw_child")


def third_party(name: str) -> list[str]:
    """The command of an MCP server installed from PyPI (its console script beside python)."""
    script = Path(sys.executable).with_name(name)
    found = str(script) if script.exists() else shutil.which(name)
    assert found is not None, f"{name} is not installed (the test extra installs it)"
    return [found]


def proxy_env(provider: LocalProvider | None, **extra: str) -> dict[str, str]:
    """The proxy's environment: this one, pointed at ``provider``, with the checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVAL_GUARD_")}
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONUNBUFFERED"] = "1"
    if provider is not None:
        env["APPROVAL_GUARD_URL"] = provider.url
        env["APPROVAL_GUARD_CREDENTIAL"] = provider.credential
    env.update(extra)
    return env


def proxy_command(flags: Sequence[str], child: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "approval_guard", "mcp-proxy", *flags, "--", *child]


@asynccontextmanager
async def session(
    command: Sequence[str], env: dict[str, str] | None = None, errlog: TextIO = sys.stderr
) -> AsyncIterator[ClientSession]:
    """A real MCP client session with ``command`` (the proxy, or a bare server), initialized.

    ``errlog``: where the process's stderr goes (a file, to read what it logged).
    """
    params = StdioServerParameters(
        command=command[0], args=list(command[1:]), env=env or proxy_env(None), cwd=str(REPO)
    )
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


@asynccontextmanager
async def proxied(
    provider: LocalProvider,
    flags: Sequence[str],
    child: Sequence[str],
    errlog: TextIO = sys.stderr,
    **env: str,
) -> AsyncIterator[ClientSession]:
    """A client session with the proxy running ``child``, guarding as ``flags`` say."""
    command = proxy_command(flags, child)
    async with session(command, proxy_env(provider, **env), errlog) as client:
        yield client


def recorded(path: Path) -> list[dict[str, Any]]:
    """The calls the recording server received, in order (nothing: an empty list)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def text_of(result: Any) -> str:
    """The one text content of a tool result."""
    [content] = result.content
    text: str = content.text
    return text
