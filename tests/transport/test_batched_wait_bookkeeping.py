"""What one loop's batched waits keep: nothing once calls are gone, and batches that fit a body."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from approval_guard._codec.clock import ClockSample, SystemClock
from approval_guard._transport import async_wait
from approval_guard._transport.answer import Answer
from approval_guard._transport.async_wait import BatchedWaits, BatchSupport
from approval_guard._transport.exchange import ExchangeSpec, read
from tests.support.hostile import approved

CLOCK = SystemClock()


def _request(rid: str) -> dict[str, Any]:
    return {
        "id": rid,
        "status": "pending",
        "tool": "issue_refund",
        "arguments": {},
        "timeout": "10m",
        "created_at": "2026-01-01T00:00:00Z",
        "deadline_at": "2099-01-01T00:00:00Z",
        "decision": None,
    }


class Provider:
    """The ``send`` of a BatchedWaits: batches answered when the test says, GETs at once."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[str], asyncio.Future[Answer]]] = []
        self.bodies: list[bytes] = []
        self.gets: list[str] = []

    async def send(self, spec: ExchangeSpec) -> Answer:
        sample = ClockSample(CLOCK.monotonic(), CLOCK.monotonic(), None)
        if spec.method == "GET":
            self.gets.append(spec.path)
            return Answer(200, _request("x"), None, sample)
        assert spec.body is not None
        self.bodies.append(spec.body)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.batches.append((json.loads(spec.body)["ids"], future))
        return await future

    def answer(self, n: int, items: list[dict[str, Any]]) -> None:
        sample = ClockSample(CLOCK.monotonic(), CLOCK.monotonic(), None)
        body = {"requests": items, "not_found": []}
        self.batches[n][1].set_result(Answer(200, body, None, sample))


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end
        await asyncio.sleep(0.01)


def test_news_for_calls_that_left_is_forgotten_without_another_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls cancelled in a batch, their news arriving after: nothing is kept once it lingered."""
    monkeypatch.setattr(async_wait, "LINGER", 0.2)
    provider = Provider()

    async def main() -> int:
        waits = BatchedWaits(provider.send, clock=CLOCK, support=BatchSupport())
        polls = [
            asyncio.ensure_future(waits.poll(read(f"req-{n}", wait=30, timeout=35)))
            for n in range(20)
        ]
        await _until(lambda: provider.batches)
        for poll in polls:
            poll.cancel()
        await asyncio.gather(*polls, return_exceptions=True)
        provider.answer(0, [approved(_request(f"req-{n}")) for n in range(20)])
        await _until(lambda: not waits.batches)
        await _until(lambda: not waits._interests)  # once lingered 0.2 s and swept
        left = len(waits._interests)
        waits.close()
        return left

    assert 0 == asyncio.run(main())


def test_a_poll_that_fell_back_to_its_get_keeps_nothing() -> None:
    """A batch answered 500: the poll reads its GET instead, and no entry is left for it."""
    provider = Provider()

    async def main() -> int:
        waits = BatchedWaits(provider.send, clock=CLOCK, support=BatchSupport())
        poll = asyncio.ensure_future(waits.poll(read("req-1", wait=30, timeout=35)))
        await _until(lambda: provider.batches)
        sample = ClockSample(CLOCK.monotonic(), CLOCK.monotonic(), None)
        provider.batches[0][1].set_result(Answer(500, {}, None, sample))
        answer = await asyncio.wait_for(poll, 5)
        assert "pending" == answer.body["status"] and provider.gets
        left = len(waits._interests)
        waits.close()
        return left

    assert 0 == asyncio.run(main())


def test_a_batch_body_stays_under_the_apis_64_kib() -> None:
    """Long ids are split across batches by their size, not only by their count."""
    provider = Provider()

    async def main() -> None:
        waits = BatchedWaits(provider.send, clock=CLOCK, support=BatchSupport())
        polls = [
            asyncio.ensure_future(waits.poll(read(f"{n:04d}-" + "x" * 190, wait=30, timeout=35)))
            for n in range(600)
        ]
        await _until(lambda: sum(len(ids) for ids, _ in provider.batches) == 600)
        for poll in polls:
            poll.cancel()
        await asyncio.gather(*polls, return_exceptions=True)
        waits.close()

    asyncio.run(main())
    assert len(provider.bodies) >= 2
    assert all(len(body) < 64 * 1024 for body in provider.bodies)
