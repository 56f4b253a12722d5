"""Fixtures for the command-line tests."""

from __future__ import annotations

import pytest

from tests.support.cli import ENV_NAMES


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own APPROVAL_GUARD_* variables must not leak into these tests."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
