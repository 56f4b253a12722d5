"""Fixtures for the mcp-proxy's tests: the recording server's file (modules require mcp)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """Where the recording MCP server writes each call it receives (one JSON line each)."""
    return tmp_path / "calls.jsonl"
