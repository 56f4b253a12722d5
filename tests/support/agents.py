"""Reviewers for agent-loop tests: policies that edit, expire or cancel; a tool that counts runs.

The scripted models live beside the tests of each framework (they import it);
these helpers import none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.testing import LocalProvider
from tests.support.api import wait_for

#: How long a policy waits before deciding: long enough that the call is waiting.
DELAY = 0.05


def approve_edited(**changes: Any) -> Callable[[LocalProvider, ApprovalRequest], None]:
    """A policy approving each request with ``changes`` applied to its arguments."""

    def policy(provider: LocalProvider, request: ApprovalRequest) -> None:
        if provider._sleep(DELAY):
            provider.approve(request.id, arguments={**request.arguments, **changes})

    return policy


def approve_expired(provider: LocalProvider, request: ApprovalRequest) -> None:
    """A policy approving each request with an approval that has already expired."""
    if provider._sleep(DELAY):
        provider.approve(request.id, valid_for=0)


def cancel_at_provider(provider: LocalProvider, request: ApprovalRequest) -> None:
    """A policy withdrawing each request at the provider, as another process might."""
    if provider._sleep(DELAY):
        provider.cancel(request.id, reason="withdrawn by the operator")


@attrs.define
class Refunds:
    """The refund tool's body: records each run's arguments, returns a plain sentence."""

    runs: list[dict[str, Any]] = attrs.field(factory=list)

    def run(self, **arguments: Any) -> str:
        self.runs.append(arguments)
        return f"refunded {arguments['amount']} of {arguments['payment_id']}"


def wait_for_status(
    provider: LocalProvider, request_id: str, status: str, limit: float = 5.0
) -> str:
    """The request's status once it is ``status``, or whatever it is after ``limit`` seconds.

    A framework may let the cancelled tool call's task finish just after the run
    it belonged to (Pydantic AI 2.2 does): the withdrawal comes a moment later.
    """
    try:
        return wait_for(
            lambda: provider.get(request_id).status, lambda now: now == status, timeout=limit
        )
    except AssertionError:
        return provider.get(request_id).status
