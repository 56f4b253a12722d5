"""Fixtures for the mcp-proxy's tests: the recording server's file (modules require mcp)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.frameworks import close_loop_left_by_run_sync


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """Where the recording MCP server writes each call it receives (one JSON line each)."""
    return tmp_path / "calls.jsonl"


@pytest.fixture(autouse=True)
def _no_event_loop_left_open() -> Iterator[None]:
    yield
    close_loop_left_by_run_sync()
