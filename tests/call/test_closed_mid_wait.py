"""A guarded call closed while it waits (an orphaned generator, a coroutine never resumed)
ends cleanly, without RuntimeError.
"""

from __future__ import annotations

import asyncio

import approval_guard._call.ops as ops_module
import approval_guard._call.rules as wait_module
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard, refund_tool


def test_closing_a_waiting_generator_is_clean(provider: LocalProvider) -> None:
    """A call's rules closed mid-wait (an orphaned generator) end without RuntimeError."""
    guard = make_guard(provider)
    spec = refund_tool(guard, []).__approval_guard__  # type: ignore[attr-defined]
    plan, _ = guard._plan(spec, ("p", 1), {}, spec.bind(("p", 1), {}))
    assert isinstance(plan, ops_module.CallPlan)
    gen = wait_module.guarded_call(
        plan, guard.ledger, guard._clock, guard._policy, spawn=guard._late_sync
    )
    op = gen.send(None)
    while not (isinstance(op, ops_module.Exchange) and op.abandonable):
        assert isinstance(op, ops_module.Exchange)
        op = gen.send(guard._client.perform(op.spec))
    gen.close()  # must not raise "generator ignored GeneratorExit"


def test_closing_a_waiting_coroutine_is_clean(provider: LocalProvider) -> None:
    """An async guarded call closed while suspended ends without RuntimeError."""
    guard = make_guard(provider)

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return payment_id

    async def main() -> None:
        coro = refund("p")
        coro.send(None)  # started: suspended in its first operation
        coro.close()  # must not raise "coroutine ignored GeneratorExit"

    asyncio.run(main())
