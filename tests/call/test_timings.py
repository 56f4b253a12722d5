"""The call rules' timing parts: the one retry loop, injected Timings, the async driver's clock."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Generator
from typing import Any

import pytest
import responses

import approval_guard as ag
from approval_guard._call.ops import Op, Sleep
from approval_guard._call.retry import Again, GaveUp, retrying
from approval_guard._codec.clock import SystemClock, sleep_async
from approval_guard._transport.sync_client import RetryPolicy
from approval_guard.testing import LocalProvider, Timings, approve_after
from tests.support.fakes import BASE, SECRET, FakeProvider, ManualClock


class AsyncManualClock(ManualClock):
    """A manual clock that async calls sleep on too."""

    async def sleep_async(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)


def rate_limited(seconds: int) -> Any:
    def fault() -> Any:
        body = json.dumps({"error": {"type": "rate_limited", "message": "later"}})
        return 429, {"Retry-After": str(seconds)}, body

    return fault


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_backoff_sleeps_on_the_injected_clock(flavour: str) -> None:
    """A Retry-After pause is slept on the Guard's clock by both drivers, not in real time."""
    clock = AsyncManualClock()
    fake = FakeProvider(clock)
    guard = ag.Guard(base_url=BASE, credential=SECRET, clock=clock, ledger=ag.MemoryLedger())
    fake.attach_async(guard)
    fake.faults = [rate_limited(30)]
    fake.script[0] = ("approve", 300)

    if flavour == "sync":

        @guard.requires_approval(timeout="30m")
        def tool(amount: int) -> int:
            return amount

        call: Any = lambda: tool(1)  # noqa: E731
    else:

        @guard.requires_approval(timeout="30m")
        async def atool(amount: int) -> int:
            return amount

        call = lambda: asyncio.run(atool(1))  # noqa: E731
    started = time.monotonic()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake.install(rsps)
        assert 1 == call()
    assert [30.0] == clock.sleeps
    assert time.monotonic() - started < 10  # a generous bound: the 30 s were not slept


def test_a_clock_without_sleep_async_still_drives_async_calls(
    fake: FakeProvider, clock: ManualClock, unit_guard: ag.Guard
) -> None:
    """A sync-only Clock (written before sleep_async existed) still runs async tools."""
    fake.script[0] = ("approve", 300)

    @unit_guard.requires_approval(timeout="30m")
    async def tool(amount: int) -> int:
        return amount

    assert 2 == asyncio.run(tool(2))
    assert not hasattr(clock, "sleep_async")


@pytest.mark.parametrize("clock", [object(), SystemClock()], ids=["no-sleep-async", "system"])
def test_sleep_async_falls_back_to_the_event_loop(clock: Any) -> None:
    """sleep_async uses the clock's own method when present, the loop's sleep otherwise."""
    asyncio.run(sleep_async(clock, 0.01))


@pytest.mark.parametrize(
    "options",
    [
        {"read_slack": -1.0},
        {"create_timeout": "10"},
        {"cancel_timeout": float("nan")},
        {"early_poll": True},
    ],
)
def test_timings_refuse_what_is_not_seconds(options: dict[str, Any]) -> None:
    """Every timing is a number of seconds, zero or more."""
    with pytest.raises(ValueError, match="Timings"):
        Timings(**options)


def _run(gen: Generator[Op, Any, Any], clock: ManualClock) -> tuple[Any, list[float]]:
    """Drive a retrying generator by hand, sleeping on ``clock``."""
    slept: list[float] = []
    try:
        op = next(gen)
        while True:
            assert isinstance(op, Sleep)
            slept.append(op.seconds)
            clock.advance(op.seconds)
            op = gen.send(None)
    except StopIteration as stop:
        return stop.value, slept


@pytest.mark.parametrize(
    ("retry_after", "asked"),
    [(None, None), (10.0, (10.0, 5.0))],
    ids=["backoff", "retry-after"],
)
def test_retrying_gives_up_rather_than_sleep_past_the_deadline(
    retry_after: float | None, asked: tuple[float, float] | None
) -> None:
    """No pause passes the deadline; a Retry-After that does not fit is reported as asked."""
    clock = ManualClock()
    until = clock.monotonic() + 5.0

    def attempt() -> Generator[Op, Any, Again]:
        return Again(retry_after, context="last")
        yield  # a generator

    policy = RetryPolicy(base=1.0, cap=1.0, floor=1.0)
    result, slept = _run(retrying(attempt, policy=policy, clock=clock, until=until), clock)
    assert isinstance(result, GaveUp)
    assert asked == result.asked
    assert "last" == result.last.context
    assert clock.monotonic() <= until
    assert all(1.0 <= s for s in slept)


def test_retrying_never_pauses_under_the_floor() -> None:
    """A Retry-After of 0 still pauses for the policy's floor."""
    clock = ManualClock()
    tries = iter([Again(0.0), Again(0.0), "done"])

    def attempt() -> Generator[Op, Any, Any]:
        return next(tries)
        yield  # a generator

    policy = RetryPolicy(floor=0.5)
    result, slept = _run(
        retrying(attempt, policy=policy, clock=clock, until=clock.monotonic() + 60), clock
    )
    assert ("done", [0.5, 0.5]) == (result, slept)


@pytest.mark.parametrize(("create_timeout", "retried"), [(0.3, True), (10.0, False)])
def test_guard_timings_bound_the_create(create_timeout: float, retried: bool) -> None:
    """Guard(timings=...) sets how long a create may take: a slow one is tried again."""
    with LocalProvider(policy=approve_after(0.1)) as provider:
        provider.faults.add("delay", on="create", delay=1.0, times=1)
        guard = ag.Guard(
            base_url=provider.url,
            credential=provider.credential,
            harness_limit="30s",
            poll_wait="1s",
            return_margin="1s",
            deadline_margin="1s",
            ledger=ag.MemoryLedger(),
            timings=Timings(create_timeout=create_timeout),
        )

        @guard.requires_approval(timeout="20s")
        def tool(amount: int) -> int:
            return amount

        assert 1 == tool(1)
        assert retried == (provider.stats.creates > 1)
