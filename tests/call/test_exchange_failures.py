"""An exchange that raises (a ValueError, an OverflowError) is a failed exchange: retried,
never raised out of the call, and NOT_OBTAINED once the time is up.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._transport.answer import Answer
from approval_guard._transport.exchange import ExchangeSpec
from approval_guard.testing import LocalProvider, approve_after
from tests.support.fakes import FakeProvider, ManualClock, make_tool, status_fault, unit_guard_for
from tests.support.guards import make_guard


def _kind(spec: ExchangeSpec) -> str:
    if spec.method == "GET":
        return "read"
    return "cancel" if spec.path.endswith("/cancel") else "create"


class RaisingClient:
    """A transport whose ``method`` exchanges are done for real, then raise ``error``."""

    def __init__(self, real: Any, method: str, error: Exception, times: int) -> None:
        self.real, self.method, self.error, self.times = real, method, error, times

    def _raise(self, spec: ExchangeSpec) -> None:
        if _kind(spec) == self.method and self.times > 0:
            self.times -= 1
            raise self.error

    def perform(self, spec: ExchangeSpec) -> Answer:
        answer: Answer = self.real.perform(spec)
        self._raise(spec)
        return answer

    def close(self) -> None:
        self.real.close()

    async def aperform(self, spec: ExchangeSpec) -> Answer:
        answer: Answer = await self.real(spec)
        self._raise(spec)
        return answer


def raising(guard: ag.Guard, method: str, error: Exception, times: int) -> None:
    """Make ``guard``'s exchanges of kind ``method`` raise ``error`` (sync and async tools)."""
    guard._client = RaisingClient(guard._client, method, error, times)  # type: ignore[assignment]
    guard._aperform = RaisingClient(guard._async_transport(), method, error, times).aperform


ERRORS = [ValueError("bad timestamp"), OverflowError("date value out of range")]


# From the hardening pass, item 2: nothing a provider sends may make the call raise.
@pytest.mark.parametrize("error", ERRORS, ids=["ValueError", "OverflowError"])
@pytest.mark.parametrize("method", ["create", "read"])
def test_an_exchange_that_always_raises_is_not_obtained(
    clock: ManualClock, fake: FakeProvider, method: str, error: Exception
) -> None:
    """A create or poll that raises every time: NOT_OBTAINED, the request withdrawn if known."""
    guard = unit_guard_for(clock)
    fake.attach_async(guard)
    raising(guard, method, error, times=10**9)
    # 20 s of refused creates first, so the harness limit comes before the deadline.
    fake.faults = [status_fault(503, "unavailable", "10")] * 2
    ran: list[Any] = []
    with ag.harness_call(limit="1m"):
        out = make_tool(guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran
    if method == "read":
        assert ["cancelled"] == [r["status"] for r in fake.requests.values()]


# From the hardening pass, item 2: nothing a provider sends may make the call raise.
@pytest.mark.parametrize("error", ERRORS, ids=["ValueError", "OverflowError"])
@pytest.mark.parametrize("method", ["create", "read"])
def test_an_exchange_that_raises_is_retried_async(
    provider: LocalProvider, method: str, error: Exception
) -> None:
    """Async: a create or poll that raises once is a failed exchange, retried, never raised."""
    provider.policy = approve_after(0.2)
    guard = make_guard(provider)
    raising(guard, method, error, times=1)

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return payment_id

    assert "p" == asyncio.run(refund("p"))
    assert 1 == len(provider.requests())
