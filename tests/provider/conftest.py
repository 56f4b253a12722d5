"""Fixtures for the provider's own tests: the server without the testing wrapper."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from approval_guard.provider import ProviderServer


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    """A ProviderServer in memory, keep-alive 1 s and client timeout 2 s (no testing wrapper)."""
    with ProviderServer(":memory:", keep_alive_seconds=1, client_timeout_seconds=2) as running:
        yield running
