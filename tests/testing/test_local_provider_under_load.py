"""LocalProvider (behind its fault proxy) holds a thousand concurrent long polls.

Async guarded calls share a few batched waits (API 1.2), so the thousand
connections past select()'s limit are held by plain long polls beside them.
"""

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


async def _hold_poll(url: str, token: str, request_id: str) -> bytes:
    """One plain long poll on its own connection; the head of its answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"GET /v1/requests/{request_id}?wait=60s HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    await writer.drain()
    try:
        return await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()


def _enough_descriptors(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


@pytest.mark.slow
def test_a_thousand_guarded_calls_wait_at_once_and_each_runs_once_when_approved() -> None:
    """1,000 async calls and 1,000 plain long polls through the proxy (>1,024 descriptors)."""
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
            while len(provider.requests("pending")) < CALLS:
                assert time.monotonic() < deadline, "the calls did not all create their requests"
                await asyncio.sleep(0.2)
            plain = [
                asyncio.create_task(_hold_poll(provider.url, provider.credential, request.id))
                for request in provider.requests("pending")
            ]
            while provider.stats.polls < CALLS or not provider.wait_for_polls(2 * CALLS, 0):
                assert time.monotonic() < deadline, "the calls did not all start waiting"
                assert not any(task.done() for task in tasks), [
                    task.result() for task in tasks if task.done()
                ][:3]
                await asyncio.sleep(0.2)
            # Every poll is held open at the provider now: its connection is counted.
            held = _open_descriptors()
            for request in provider.requests("pending"):
                await asyncio.to_thread(provider.approve, request.id)
            results = await asyncio.wait_for(asyncio.gather(*tasks), 120)
            heads = await asyncio.wait_for(asyncio.gather(*plain), 120)
            assert all(head.startswith(b"HTTP/1.1 200 ") for head in heads)
            return results, held, provider.stats.polls

        try:
            results, held, polls = asyncio.run(main())
        finally:
            guard.close()

    assert held > 1_024, "the test must hold descriptors past select()'s limit"
    assert list(range(CALLS)) == results
    assert list(range(CALLS)) == sorted(ran)
    assert polls >= CALLS
