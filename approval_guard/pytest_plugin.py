"""pytest plugin (entry point ``pytest11``): a local provider and a guard per test.

Fixtures:

``approval_provider``
    A fresh :class:`approval_guard.testing.LocalProvider` on ``":memory:"``,
    started on 127.0.0.1 on a free port and stopped after the test.

``guard``
    An ``approval_guard.Guard`` built against ``approval_provider`` with short
    limits suited to tests (``harness_limit="2m"``, ``poll_wait="5s"``, margins
    of ``1s``), closed after the test.

Example::

    def test_refund_runs_when_approved(approval_provider, guard):
        approval_provider.policy = approve_after(0.1)
        ...
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from approval_guard.testing import LocalProvider


@pytest.fixture
def approval_provider() -> Iterator[LocalProvider]:
    """A fresh in-memory local provider, running for the duration of one test."""
    # Imported here so that merely loading the plugin (every pytest run in an
    # environment where approval_guard is installed) stays cheap.
    from approval_guard.testing import LocalProvider

    with LocalProvider(":memory:") as provider:
        yield provider


@pytest.fixture
def guard(approval_provider: LocalProvider) -> Iterator[Any]:
    """An ``approval_guard.Guard`` pointed at ``approval_provider`` with test-sized limits.

    Its pooled connections are closed after the test.
    """
    # Imported lazily: the plugin must load even where Guard cannot be imported.
    from approval_guard import Guard

    made = Guard(
        base_url=approval_provider.url,
        credential=approval_provider.credential,
        harness_limit="2m",
        poll_wait="5s",
        return_margin="1s",
        deadline_margin="1s",
    )
    yield made
    made.close()
