"""Review of issue 11 (when=, redact=, editable=, events, advice): each test is a bug found.

Real HTTP against the local provider, sync and async where the path differs.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.exact_json import canonical_json
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard
from tests.support.tools import MODES, define, refund, run


@pytest.mark.parametrize("mode", MODES)
def test_a_forged_marker_refusal_never_carries_the_redacted_secret(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    """The NotRun for arguments holding a forged marker shows redacted values, never the secret."""
    events: list[Any] = []

    def pay(api_key: str, memo: Any) -> None: ...

    tool = define(guard, mode, pay, redact=("api_key",), on_event=events.append)
    out = run(tool, "sk_live_SECRET123", {"$redacted": "0123456789ab"})
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
    shown = out.to_json() + repr(out) + repr(events)
    assert "SECRET123" not in shown
    assert [] == provider.requests()


@pytest.mark.parametrize("mode", MODES)
def test_a_redacted_secret_that_is_not_valid_unicode_is_hidden_not_raised(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    """A lone surrogate in a redacted value is never sent, so it cannot make the call raise."""
    got: list[Any] = []

    def login(user: str, pin: str) -> str:
        got.append(pin)
        return "in"

    from approval_guard.testing import approve_after

    provider.policy = approve_after(0.05)
    tool = define(guard, mode, login, redact=("pin",))
    secret = "12\ud80034"
    assert "in" == run(tool, "ada", secret)
    assert [secret] == got
    (request,) = provider.requests()
    assert {"$redacted"} == set(request.arguments["pin"])


@pytest.mark.parametrize(
    "editable",
    [("amount", 1), None, 5, (("amount",),)],
    ids=["mixed", "none", "int", "nested"],
)
def test_a_bad_editable_option_raises_value_error(guard: ag.Guard, editable: Any) -> None:
    """editable= that is not a collection of names is a ValueError at decoration, not TypeError."""
    with pytest.raises(ValueError, match="editable"):
        guard.requires_approval(editable=editable)(refund([]))


@pytest.mark.parametrize("mode", MODES)
def test_a_slow_tool_started_callback_cannot_outlast_the_approval(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    """The approval's expiry is checked after ToolStarted's callbacks return, not before."""
    ran: list[Any] = []

    def slow(event: Any) -> None:
        if isinstance(event, ag.ToolStarted):
            time.sleep(2.0)

    def policy(provider: LocalProvider, request: Any) -> None:
        provider.approve(request.id, valid_for=2)

    provider.policy = policy
    tool = define(guard, mode, refund(ran), on_event=slow)
    out = run(tool, "pay", 1)
    assert [] == ran
    assert isinstance(out, ag.NotRun) and ag.Reason.APPROVAL_EXPIRED is out.reason


@pytest.mark.parametrize("mode", MODES)
def test_time_spent_in_when_counts_against_the_harness_limit(
    provider: LocalProvider, mode: str
) -> None:
    """A slow when= uses up the harness's time: the wait that follows still ends inside it."""
    short = make_guard(provider, harness_limit="3s", return_margin="1s", deadline_margin="1s")
    ran: list[Any] = []

    def when(args: Any) -> bool:
        time.sleep(1.5)
        return True

    out = run(define(short, mode, refund(ran), when=when), "pay", 1)
    short.close()
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
    assert "Too little of the harness's time limit" in out.message
    assert [] == provider.requests() and [] == ran


def test_a_late_denial_is_not_advised_as_nobody_denied_it(provider: LocalProvider) -> None:
    """A request reported denied as the wait ends is never advised "nobody denied it"."""
    from approval_guard.testing import deny_after
    from tests.support.proxies import RewritingProxy

    def pending(obj: dict[str, Any]) -> None:
        obj["status"] = "pending"
        obj.pop("decision", None)

    provider.policy = deny_after(0.0, "no")
    proxy = RewritingProxy(provider.url, pending)
    proxied = make_guard(
        provider,
        base_url=proxy.url,
        allow_insecure_http=True,
        harness_limit="4s",
        return_margin="1s",
        deadline_margin="1s",
    )
    try:
        out = run(define(proxied, "sync", refund([])), "pay", 1)
    finally:
        proxied.close()
        proxy.close()
    assert isinstance(out, ag.NotRun)
    assert "denied" in out.message
    assert "Nobody denied it" not in str(out)


@pytest.mark.parametrize("mode", MODES)
def test_a_callback_that_changes_an_event_cannot_change_the_record(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    """Events hold copies: a callback scrubbing ArgumentsEdited leaves the record's digest true."""
    from tests.support.tools import edit_to

    def scrub(event: Any) -> None:
        if isinstance(event, ag.ArgumentsEdited):
            event.after["amount"] = 1
            event.before.clear()

    ran: list[Any] = []
    provider.policy = edit_to(amount=2500)
    tool = define(guard, mode, refund(ran), editable=("amount",), on_event=scrub)
    assert {"refunded": 2500, "currency": "GBP"} == run(tool, "pay_1", 4900)
    (request,) = provider.requests()
    row = guard.ledger.get(request.id)
    assert row is not None
    ran_json = {"payment_id": "pay_1", "amount": 2500, "currency": "GBP"}
    assert hashlib.sha256(canonical_json(ran_json).encode()).hexdigest() == row.arguments_digest


@pytest.fixture
def exporter() -> Iterator[Any]:
    from tests.call.test_otel_spans import _EXPORTER

    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def test_a_cancelled_tool_on_the_when_false_path_is_no_error_span(
    provider: LocalProvider, guard: ag.Guard, exporter: Any
) -> None:
    """Only a tool's own exception is an ERROR span: a cancelled task is not one, skipped or not."""
    from opentelemetry.trace import StatusCode

    started = asyncio.Event()

    async def slow(amount: int) -> None:
        started.set()
        await asyncio.sleep(30)

    tool = guard.requires_approval(when=lambda args: False)(slow)

    async def main() -> None:
        task = asyncio.ensure_future(tool(1))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "approval_guard.call"]
    assert StatusCode.ERROR is not span.status.status_code
    assert "interrupted" == span.attributes["approval_guard.outcome"]


@pytest.mark.parametrize("mode", MODES)
def test_a_call_that_raises_before_it_is_planned_still_ends_its_span(
    provider: LocalProvider, guard: ag.Guard, mode: str, exporter: Any
) -> None:
    """Arguments that cannot be sent raise, as documented, and the call's span is still ended."""
    tool = define(guard, mode, refund([]))
    with pytest.raises(ag.ArgumentSerializationError):
        run(tool, object(), 1)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "approval_guard.call"]
    assert "raised" == span.attributes["approval_guard.outcome"]
