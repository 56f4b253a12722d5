"""Hostile and unlucky conditions: a dripping provider, closed generators, lost creates."""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import approval_guard as ag
import approval_guard._call.ops as ops_module
import approval_guard._call.rules as wait_module
from approval_guard._call.verdict import same_json
from approval_guard._codec.serialize import to_json_value
from approval_guard.testing import LocalProvider, approve_after, deny_after
from tests.support.guards import ctrl_c_during, finish, in_thread, make_guard, refund_tool


def test_retry_after_longer_than_the_wait_ends_it_without_spinning(
    provider: LocalProvider,
) -> None:
    """A poll answered 429 Retry-After: 100 gives up at once instead of polling in a loop."""
    provider.faults.add("status", on="poll", status=429, retry_after=100, times=10_000)
    guard = make_guard(provider, harness_limit="8s", poll_wait="1s")
    started = time.monotonic()
    out = refund_tool(guard, [])("p", 1)
    assert time.monotonic() - started < 8
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert provider.stats.polls <= 2
    assert "cancelled" == provider.requests()[0].status


def test_lost_create_answers_are_recovered_and_withdrawn(
    provider: LocalProvider,
) -> None:
    """A create answer lost, then no answer in time: the request made is found and cancelled."""
    provider.faults.add("drop_after_commit", on="create")
    provider.faults.add("status", on="create", status=503, retry_after=30)
    guard = make_guard(provider, harness_limit="4s")
    out = refund_tool(guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    [request] = provider.requests()
    assert "cancelled" == request.status
    assert request.id == out.request_id


def test_ctrl_c_during_the_create_still_withdraws_the_request(
    provider: LocalProvider,
) -> None:
    """KeyboardInterrupt while the create is in flight: the request it made is cancelled."""
    provider.faults.add("delay", on="create", delay=1.0)
    tool = refund_tool(make_guard(provider), [])
    with pytest.raises(KeyboardInterrupt):
        ctrl_c_during(lambda: tool("p", 1), after=0.4)
    # Withdrawn by the recovery, or as soon as the delayed create is answered.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        statuses = [r.status for r in provider.requests()]
        if statuses == ["cancelled"]:
            break
        time.sleep(0.05)
    assert ["cancelled"] == [r.status for r in provider.requests()]


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


def test_closing_a_waiting_generator_is_clean(provider: LocalProvider) -> None:
    """A call's rules closed mid-wait (an orphaned generator) end without RuntimeError."""
    guard = make_guard(provider)
    spec = refund_tool(guard, []).__approval_guard__  # type: ignore[attr-defined]
    plan, _ = guard._plan(spec, ("p", 1), {}, spec.bind(("p", 1), {}))
    assert isinstance(plan, ops_module.CallPlan)
    gen = wait_module.guarded_call(plan, guard.ledger, guard._clock, guard._policy,
                                   spawn=guard._late_sync)
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


def test_denial_seen_while_giving_up_is_not_called_undenied(
    provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel answered 'already denied' never yields the words 'nobody denied it'."""
    provider.faults.add("status", on="create", status=503, retry_after=2)
    tool = refund_tool(make_guard(provider, poll_wait="1s"), [])

    original = provider.server.store.cancel

    def deny_first(request_id: str, **kwargs: Any) -> Any:
        provider.deny(request_id, "no")
        return original(request_id, **kwargs)

    monkeypatch.setattr(provider.server.store, "cancel", deny_first)
    with ag.harness_call(limit="5s"):
        out = tool("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "nobody denied" not in out.message and "denied" in out.message


@pytest.mark.parametrize(
    ("sent", "echoed", "same"),
    [
        ({"confirm": True}, {"confirm": 1}, False),
        ({"ids": [1, 2]}, {"ids": [True, 2.0]}, False),
        ({"amount": 5}, {"amount": 5.0}, True),
        ({"a": None}, {"a": 0}, False),
        ({"a": "1"}, {"a": 1}, False),
        ({"a": [1]}, {"a": [1, 2]}, False),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, False),
    ],
)
def test_echo_is_compared_as_json(sent: Any, echoed: Any, same: bool) -> None:
    """true is not 1 and lists are compared whole; 5 and 5.0 are one JSON number."""
    assert same == same_json(sent, echoed)


def test_netrc_does_not_replace_the_credential(
    provider: LocalProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .netrc entry for the provider's host does not replace the Bearer credential."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password elsewhere\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    provider.policy = approve_after(0.0)
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(make_guard(provider), [])(
        "p", 1
    )


def test_enum_key_that_collides_with_a_string_key_is_refused() -> None:
    """{Colour.RED: ..., "red": ...} would show the reviewer one entry; it is refused."""

    class Colour(enum.Enum):
        RED = "red"

    with pytest.raises(TypeError, match="two keys"):
        to_json_value({Colour.RED: "refund 10", "red": "refund 99999"})


def test_pydantic_fields_excluded_from_dumps_are_still_shown() -> None:
    """Every field the tool receives is sent for approval, exclude=True or not."""
    pydantic = pytest.importorskip("pydantic")

    class Order(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        amount: int
        account: str = pydantic.Field(default="own", exclude=True)

    assert {"amount": 5, "account": "elsewhere"} == to_json_value(
        Order(amount=5, account="elsewhere")
    )


def test_a_date_header_at_the_end_of_time_fails_closed() -> None:
    """A Date so far ahead that the arithmetic overflows: not valid, no exception."""
    from approval_guard._codec.clock import ClockSample, still_valid

    sample = ClockSample(sent=0.0, received=0.0,
                         date=datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc))
    assert (False, None) == still_valid(datetime(9999, 12, 31, tzinfo=timezone.utc), sample, 5.0)


def test_deny_policy_helper_is_importable() -> None:
    """deny_after is part of the testing helpers used above."""
    assert callable(deny_after(0.0, "no"))


def test_abandon_checked_again_after_the_claim(provider: LocalProvider) -> None:
    """The abandon event is looked at between the claim and the call."""
    provider.policy = approve_after(0.0)
    gone = threading.Event()

    class AbandonWhileClaiming(ag.MemoryLedger):
        def claim(self, request_id: str, *, tool: str, worker: str) -> bool:
            gone.set()
            return super().claim(request_id, tool=tool, worker=worker)

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
