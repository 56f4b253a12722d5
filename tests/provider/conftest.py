"""Fixtures for the local provider's integration tests: real HTTP on 127.0.0.1."""

from __future__ import annotations

import pytest

from approval_guard.testing import LocalProvider
from tests.support.api import Api


@pytest.fixture
def api(provider: LocalProvider) -> Api:
    """The instance credential's client."""
    return Api(provider.url, provider.credential)


@pytest.fixture
def reviewer(provider: LocalProvider) -> Api:
    """The reviewer credential's client."""
    return Api(provider.url, provider.reviewer_credential)
