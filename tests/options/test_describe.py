"""``describe=``: checked at decoration as ``when=`` is, on every way a tool is guarded.

What it sends and how a failing one fails closed: tests/call/test_batch_and_context.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import approval_guard as ag
from approval_guard._options.shape import unknown_tool
from approval_guard._options.spec import build_spec
from approval_guard.testing import LocalProvider, approve_after
from tests.support.tools import define, refund, run


@pytest.mark.parametrize(
    ("describe", "words"),
    [
        ("Refunds a payment.", "describe must be a callable"),
        (lambda: "x", "exactly one argument"),
        (lambda a, b: "x", "exactly one argument"),
    ],
)
def test_a_bad_describe_raises_at_decoration(guard: ag.Guard, describe: Any, words: str) -> None:
    """Before any function is given, on a Guard and at module level alike."""
    with pytest.raises(ag.ConfigurationError, match=words):
        guard.requires_approval(describe=describe)
    with pytest.raises(ag.ConfigurationError, match=words):
        ag.requires_approval(describe=describe)


def test_a_bad_describe_of_a_framework_tool_raises_when_its_options_are_checked() -> None:
    """A framework's tool, checked by the one builder before it is known, checks it too."""
    with pytest.raises(ag.ConfigurationError, match="describe must be a callable"):
        build_spec(unknown_tool(), options={"describe": 3}, name="issue_refund")


def test_an_async_describe_on_a_sync_tool_raises_at_decoration(guard: ag.Guard) -> None:
    """It could never be awaited: refused when the function is decorated."""

    async def describe(arguments: Any) -> str:
        return "x"

    with pytest.raises(ag.ConfigurationError, match="async describe needs an async tool"):

        @guard.requires_approval(describe=describe)
        def tool(x: int) -> int:
            return x


def test_when_false_runs_without_asking_describe(provider: LocalProvider, guard: ag.Guard) -> None:
    """No request, no sentence: describe is asked only for a request to be sent."""
    asked: list[Any] = []
    ran: list[Any] = []

    def describe(arguments: Any) -> str:
        asked.append(arguments)
        return "x"

    tool = define(guard, "sync", refund(ran), when=lambda a: False, describe=describe)
    provider.policy = approve_after(0)
    assert {"refunded": 5, "currency": "GBP"} == run(tool, "p", 5)
    assert [] == asked
    assert [] == provider.requests()
