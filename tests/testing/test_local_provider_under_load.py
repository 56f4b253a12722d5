"""LocalProvider (behind its fault proxy) holds a thousand concurrent long polls."""

# From issue 21: the proxy's relay used select(), which fails past descriptor 1023, so a
# suite with a few hundred concurrent guarded calls broke with RemoteDisconnected.

from __future__ import annotations

import asyncio
import os
import resource
import time

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider

CALLS = 1_000


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _enough_descriptors(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


@pytest.mark.slow
def test_a_thousand_guarded_calls_wait_at_once_and_each_runs_once_when_approved() -> None:
    """1,000 async calls long-poll through the proxy at once (>1,024 descriptors); all run."""
    _enough_descriptors(8 * CALLS)
    ran: list[int] = []
    with LocalProvider() as provider:
        guard = ag.Guard(
            base_url=provider.url,
            credential=provider.credential,
            harness_limit="10m",
            poll_wait="60s",
            allow_insecure_http=True,
            ledger=ag.MemoryLedger(),
        )

        @guard.requires_approval(timeout="5m")
        async def refund(n: int) -> int:
            ran.append(n)
            return n

        async def main() -> tuple[list[int | ag.NotRun], int, int]:
            tasks = [asyncio.create_task(refund(n)) for n in range(CALLS)]
            deadline = time.monotonic() + 120
            while len(provider.requests("pending")) < CALLS or provider.stats.polls < CALLS:
                assert time.monotonic() < deadline, "the calls did not all start waiting"
                assert not any(task.done() for task in tasks), [
                    task.result() for task in tasks if task.done()
                ][:3]
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.5)  # every poll is now held open at the provider
            held = _open_descriptors()
            for request in provider.requests("pending"):
                await asyncio.to_thread(provider.approve, request.id)
            results = await asyncio.wait_for(asyncio.gather(*tasks), 120)
            return results, held, provider.stats.polls

        try:
            results, held, polls = asyncio.run(main())
        finally:
            guard.close()

    assert held > 1_024, "the test must hold descriptors past select()'s limit"
    assert list(range(CALLS)) == results
    assert list(range(CALLS)) == sorted(ran)
    assert polls >= CALLS
