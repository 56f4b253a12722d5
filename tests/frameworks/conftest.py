"""Fixtures of the framework tests: a Guard whose harness allows only a few seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider


@pytest.fixture
def short_guard(provider: LocalProvider) -> Iterator[ag.Guard]:
    """A Guard whose harness allows 4 s, so a request nobody decides ends in about 2 s."""
    made = ag.Guard(
        base_url=provider.url,
        credential=provider.credential,
        harness_limit="4s",
        return_margin="1s",
        deadline_margin="1s",
        poll_wait="1s",
    )
    yield made
    made.close()
