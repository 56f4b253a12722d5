"""The harness gives up (an abandon event, Ctrl-C, a cancelled task): nothing runs, the call
returns promptly, and the request it made is withdrawn, not left pending.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._call.withdraw import RECOVER_PAUSE_CAP
from approval_guard.testing import LocalProvider, approve_after
from tests.support.api import wait_for
from tests.support.guards import ctrl_c_during, finish, in_thread, make_guard, refund_tool


def test_ctrl_c_during_the_create_still_withdraws_the_request(
    provider: LocalProvider,
) -> None:
    """KeyboardInterrupt while the create is in flight: the request it made is cancelled."""
    provider.faults.add("delay", on="create", delay=1.0)
    tool = refund_tool(make_guard(provider), [])
    with pytest.raises(KeyboardInterrupt):
        ctrl_c_during(lambda: tool("p", 1), after=0.4)
    # Withdrawn by the recovery, or by the late withdrawal once the held create is made.
    wait_for(_statuses(provider), lambda statuses: ["cancelled"] == statuses, timeout=15)


def _statuses(provider: LocalProvider) -> Callable[[], list[str]]:
    return lambda: [r.status for r in provider.requests()]


class _PauseLog(ag.SystemClock):
    """The real clock, but every pause is recorded and cut to 0.05 s (more replays per second)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    def sleep(self, seconds: float, abandon: threading.Event | None = None) -> bool:
        self.pauses.append(seconds)
        return super().sleep(min(seconds, 0.05), abandon)


# CI: the provider still held the create when the recovery's 2 s ran out, and the Ctrl-C had
# cut the exchange that sent it, so nobody withdrew the request it made a moment later.
def test_ctrl_c_during_a_create_held_past_the_recovery_still_withdraws_it(
    provider: LocalProvider,
) -> None:
    """The create is made only after the recovery gave up: withdrawn in the background then."""
    provider.faults.add("delay", on="create", delay=3.0)  # cancel_timeout is 2 s
    clock = _PauseLog()
    tool = refund_tool(make_guard(provider, clock=clock), [])
    with pytest.raises(KeyboardInterrupt):
        ctrl_c_during(lambda: tool("p", 1), after=0.4)
    wait_for(_statuses(provider), lambda statuses: ["cancelled"] == statuses, timeout=15)
    # The replays find the key in use until the create is made: asked again within a
    # second each time, not after a backoff grown to 5 s.
    assert clock.pauses and max(clock.pauses) <= RECOVER_PAUSE_CAP, clock.pauses


def test_a_recovered_approval_does_not_run_once_the_harness_has_abandoned_it(
    provider: LocalProvider,
) -> None:
    """Abandoned while the (already approved) create answer was on its way: not run."""
    provider.policy = approve_after(0.0)
    ran: list[Any] = []
    first = refund_tool(make_guard(provider), ran)
    with ag.harness_call(idempotency_key="tc_abandon"):
        first("p", 1)
    # A restarted worker (its own record) replays the key, and the harness gives up meanwhile.
    tool = refund_tool(make_guard(provider, ledger=ag.MemoryLedger()), ran)
    provider.faults.add("delay", on="create", delay=1.0)
    gone = threading.Event()
    threading.Timer(0.3, gone.set).start()
    with ag.harness_call(idempotency_key="tc_abandon", abandon=gone):
        out = tool("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert 1 == len(ran)


def test_abandon_checked_again_after_the_claim(provider: LocalProvider) -> None:
    """The abandon event is looked at between the claim and the call."""
    provider.policy = approve_after(0.0)
    gone = threading.Event()

    class AbandonWhileClaiming(ag.MemoryLedger):
        def claim(
            self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
        ) -> bool:
            gone.set()
            return super().claim(
                request_id, tool=tool, worker=worker, arguments_digest=arguments_digest
            )

    ledger = AbandonWhileClaiming()
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider, ledger=ledger), ran)
    thread, box = in_thread(lambda: _with_abandon(gone, tool))
    out = finish(thread, box)
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert [] == ran
    assert [] == ledger.recent()


def _with_abandon(gone: threading.Event, tool: Any) -> Any:
    with ag.harness_call(abandon=gone):
        return tool("p", 1)


CREATE_DELAY = 2.5


def _no_request_left_pending(provider: LocalProvider) -> None:
    wait_for(
        provider.requests,
        lambda requests: requests and all(r.status != "pending" for r in requests),
        timeout=CREATE_DELAY + 3,
        what="a request was left pending",
    )


# From the hardening pass, item 9: abandoning during a slow create.
def test_abandoning_during_a_slow_create_returns_promptly(
    provider: LocalProvider,
) -> None:
    """Abandoned 0.3 s into a create that takes 2.5 s: CANCELLED at once, nothing left pending."""
    provider.faults.add("delay", on="create", delay=CREATE_DELAY)
    gone = threading.Event()
    threading.Timer(0.3, gone.set).start()
    ran: list[Any] = []
    started = time.monotonic()
    with ag.harness_call(abandon=gone):
        out = refund_tool(make_guard(provider), ran)("p", 1)
    assert time.monotonic() - started < CREATE_DELAY - 0.3
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert [] == ran
    _no_request_left_pending(provider)


# From the hardening pass, item 9: abandoning during a slow create.
def test_cancelling_a_task_during_a_slow_create_returns_promptly(
    provider: LocalProvider,
) -> None:
    """A task cancelled while its create is held up 2.5 s: CancelledError at once, none pending."""
    provider.faults.add("delay", on="create", delay=CREATE_DELAY)
    guard = make_guard(provider)

    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str) -> str:
        return payment_id

    async def main() -> float:
        task = asyncio.create_task(refund("p"))
        # The create is held up at the provider's fault proxy (its delay logged).
        await asyncio.to_thread(wait_for, lambda: provider.faults.log, timeout=10)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    assert asyncio.run(main()) < CREATE_DELAY - 0.5
    _no_request_left_pending(provider)
