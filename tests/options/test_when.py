"""when= (issue 11): a predicate on the call's arguments; exactly False runs the tool at once
without asking, anything else (True, an error, a non-bool) asks. Over real HTTP against the
local provider, sync and async (``mode``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after
from tests.support.fakes import ShiftedSystemClock
from tests.support.guards import make_guard
from tests.support.tools import MODES, Currency, define, refund, run


def small(args: Any) -> bool:
    return bool(args["amount"] >= 5000)


@pytest.mark.parametrize("mode", MODES)
def test_refunds_under_50_gbp_run_at_once_and_larger_ones_ask(
    provider: LocalProvider, guard: ag.Guard, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Any] = []
    ran: list[Any] = []
    tool = define(
        guard,
        mode,
        refund(ran),
        when=lambda args: args["currency"] != "GBP" or args["amount"] >= 5000,
        on_event=events.append,
    )
    caplog.set_level(logging.INFO, "approval_guard")
    assert {"refunded": 4900, "currency": "GBP"} == run(tool, "pay_1", 4900)
    assert [] == provider.requests()  # no request was made
    assert [("pay_1", 4900, "GBP")] == ran
    assert any(
        "approval not needed for issue_refund" in r.message and r.levelno == logging.INFO
        for r in caplog.records
    )
    assert [ag.ApprovalSkipped, ag.ToolStarted, ag.ToolFinished] == [type(e) for e in events]
    assert {"payment_id": "pay_1", "amount": 4900, "currency": "GBP"} == events[0].arguments
    assert events[1].request_id is None
    # 50 GBP and more: a person is asked.
    provider.policy = deny_after(0.05, "too much")
    out = run(tool, "pay_2", 5000)
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.DENIED
    assert 1 == len(provider.requests())
    assert 1 == len(ran)


@pytest.mark.parametrize("mode", MODES)
def test_when_gets_the_original_values_with_defaults_applied(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    seen: list[dict[str, Any]] = []

    def when(args: Any) -> bool:
        seen.append(dict(args))
        return False

    def pay(amount: Decimal, when_: date, currency: Currency = Currency.GBP) -> str:
        return "ok"

    tool = define(guard, mode, pay, when=when)
    assert "ok" == run(tool, Decimal("12.50"), date(2026, 1, 2))
    assert [
        {"amount": Decimal("12.50"), "when_": date(2026, 1, 2), "currency": Currency.GBP}
    ] == seen
    assert type(seen[0]["amount"]) is Decimal


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "when",
    [
        pytest.param(lambda args: 1 / 0, id="raises"),
        pytest.param(lambda args: 0, id="falsy-int"),
        pytest.param(lambda args: None, id="none"),
        pytest.param(lambda args: "no", id="string"),
        pytest.param(lambda args: args.pop("amount"), id="mutates"),
    ],
)
def test_a_when_that_raises_or_returns_no_bool_means_ask(
    provider: LocalProvider,
    guard: ag.Guard,
    mode: str,
    when: Callable[[Any], Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[Any] = []
    tool = define(guard, mode, refund(ran), when=when)
    provider.policy = deny_after(0.05)
    with caplog.at_level(logging.WARNING, "approval_guard"):
        out = run(tool, "pay", 10)
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.DENIED
    assert [] == ran
    assert 1 == len(provider.requests())
    # The sent arguments are the call's own, whatever the predicate did.
    (request,) = provider.requests()
    assert {"payment_id": "pay", "amount": 10, "currency": "GBP"} == request.arguments
    assert any(
        r.levelno == logging.WARNING and "asking for approval" in r.message for r in caplog.records
    )


def test_an_async_when_is_awaited_for_an_async_tool(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    async def when(args: Any) -> bool:
        await asyncio.sleep(0)
        return bool(args["amount"] >= 100)

    ran: list[Any] = []
    tool = define(guard, "async", refund(ran), when=when)
    assert {"refunded": 5, "currency": "GBP"} == run(tool, "p", 5)
    assert [] == provider.requests()
    provider.policy = approve_after(0.05)
    assert {"refunded": 500, "currency": "GBP"} == run(tool, "p", 500)
    assert 1 == len(provider.requests())


def test_an_async_when_that_raises_asks(provider: LocalProvider, guard: ag.Guard) -> None:
    async def when(args: Any) -> bool:
        raise RuntimeError("boom")

    ran: list[Any] = []
    tool = define(guard, "async", refund(ran), when=when)
    provider.policy = deny_after(0.05)
    out = run(tool, "p", 5)
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.DENIED


def test_a_sync_when_returning_a_coroutine_asks(provider: LocalProvider, guard: ag.Guard) -> None:
    async def later() -> bool:
        return False

    ran: list[Any] = []
    tool = define(guard, "sync", refund(ran), when=lambda args: later())
    provider.policy = deny_after(0.05)
    out = run(tool, "p", 5)
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.DENIED


@pytest.mark.parametrize(
    ("when", "words"),
    [
        ("yes", "when must be a callable"),
        (lambda: True, "exactly one argument"),
        (lambda a, b: True, "exactly one argument"),
    ],
)
def test_a_bad_when_raises_at_decoration(guard: ag.Guard, when: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        guard.requires_approval(when=when)


def test_an_async_when_on_a_sync_tool_raises_at_decoration(guard: ag.Guard) -> None:
    async def when(args: Any) -> bool:
        return True

    with pytest.raises(ValueError, match="async when needs an async tool"):

        @guard.requires_approval(when=when)
        def tool(x: int) -> int:
            return x


def test_when_false_still_raises_the_tools_own_exception(guard: ag.Guard) -> None:
    events: list[Any] = []

    @guard.requires_approval(when=lambda args: False, on_event=events.append)
    def tool(x: int) -> int:
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        tool(1)
    assert isinstance(events[-1], ag.ToolFinished) and "KeyError" == events[-1].error


@pytest.mark.parametrize("mode", MODES)
def test_when_false_still_honours_an_abandoned_call(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    ran: list[Any] = []
    tool = define(guard, mode, refund(ran), when=lambda args: False)
    gone = threading.Event()
    gone.set()
    with ag.harness_call(idempotency_key="k_gone", abandon=gone):
        out = run(tool, "pay", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED is out.reason
    assert [] == ran and [] == provider.requests()


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
@pytest.mark.parametrize("mode", MODES)
def test_time_spent_in_when_counts_against_the_harness_limit(
    provider: LocalProvider, mode: str
) -> None:
    """A slow when= uses up the harness's time: the wait that follows still ends inside it."""
    clock = ShiftedSystemClock()
    short = make_guard(
        provider, harness_limit="3s", return_margin="1s", deadline_margin="1s", clock=clock
    )
    ran: list[Any] = []

    def when(args: Any) -> bool:
        clock.advance(1.5)  # a slow when, without the wall-clock wait
        return True

    out = run(define(short, mode, refund(ran), when=when), "pay", 1)
    short.close()
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
    assert "Too little of the harness's time limit" in out.message
    assert [] == provider.requests() and [] == ran
