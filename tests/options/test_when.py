"""Issue 11: when=, redact=, editable=, events, messages, over real HTTP against the local provider.

Every test runs the tool sync and async (``mode``), against a real
:class:`LocalProvider` on 127.0.0.1; hostile providers are a real HTTP proxy
that rewrites the local provider's answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.exact_json import canonical_json
from approval_guard.testing import LocalProvider, approve_after, deny_after
from tests.support.guards import make_guard
from tests.support.proxies import RewritingProxy
from tests.support.tools import MODES, define, edit_to, refund, run


class Currency(str, enum.Enum):
    GBP = "GBP"
    EUR = "EUR"


@dataclasses.dataclass
class Card:
    holder: str
    number: str


def small(args: Any) -> bool:
    return bool(args["amount"] >= 5000)


# --------------------------------------------------------------------------- when=


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


# --------------------------------------------------------------------------- redact=

MARKER_KEYS = {"$redacted"}


def marker_digest(value: Any) -> str:
    assert isinstance(value, dict) and MARKER_KEYS == set(value), value
    digest = value["$redacted"]
    assert isinstance(digest, str) and 12 == len(digest)
    int(digest, 16)
    return digest


@pytest.mark.parametrize("mode", MODES)
def test_a_redacted_value_never_reaches_the_provider_and_the_tool_gets_it(
    provider: LocalProvider, guard: ag.Guard, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[Any] = []

    def charge(api_key: str, card: Card, amount: int) -> str:
        got.append((api_key, card, amount))
        return "charged"

    events: list[Any] = []
    tool = define(guard, mode, charge, redact=("api_key", "card.number"), on_event=events.append)
    provider.policy = approve_after(0.05)
    caplog.set_level(logging.DEBUG)
    card = Card(holder="Ada", number="4111111111111111")
    assert "charged" == run(tool, "sk_live_SECRET123", card, 10)
    assert [("sk_live_SECRET123", card, 10)] == got
    (request,) = provider.requests()
    marker_digest(request.arguments["api_key"])
    assert "Ada" == request.arguments["card"]["holder"]
    marker_digest(request.arguments["card"]["number"])
    assert 10 == request.arguments["amount"]
    everything = json.dumps([request.arguments, caplog.text, [repr(e) for e in events]])
    assert "SECRET123" not in everything and "4111111111111111" not in everything


@pytest.mark.parametrize("mode", MODES)
def test_a_not_run_carries_the_redacted_form_only(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    def login(user: str, pin: str) -> str:
        return "in"

    tool = define(guard, mode, login, redact=("pin",))
    provider.policy = deny_after(0.05, "no")
    out = run(tool, "ada", "1234")
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.DENIED
    assert "1234" not in out.to_json() and "1234" not in repr(out)
    marker_digest(out.arguments["pin"])


def test_markers_are_stable_for_a_guard_and_differ_between_values_and_keys(
    provider: LocalProvider,
) -> None:
    provider.policy = deny_after(0.0)

    def digests(guard: ag.Guard, *pins: str) -> list[str]:
        @guard.requires_approval(redact=("pin",))
        def login(pin: str) -> None: ...

        out = []
        for pin in pins:
            result = login(pin)
            assert isinstance(result, ag.NotRun)
            out.append(marker_digest(result.arguments["pin"]))
        return out

    one = make_guard(provider)
    a1, b1, a2 = digests(one, "1234", "9999", "1234")
    assert a1 == a2 and a1 != b1
    # A four-digit PIN is not recoverable by trying all 10,000: the digest is keyed.
    unkeyed = {
        hashlib.sha256(canonical_json(f"{n:04d}").encode()).hexdigest()[:12] for n in range(10000)
    }
    assert a1 not in unkeyed
    # Another Guard has another random key...
    (other,) = digests(make_guard(provider), "1234")
    assert other != a1
    # ...unless they share one, as processes replaying one call must.
    key = "k" * 32
    (k1,) = digests(make_guard(provider, redaction_key=key), "1234")
    (k2,) = digests(make_guard(provider, redaction_key=key), "1234")
    assert k1 == k2 != a1


def test_a_redaction_key_must_be_long_enough_and_is_never_shown(provider: LocalProvider) -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        make_guard(provider, redaction_key="short")
    guard = make_guard(provider, redaction_key="s3cr3t-redaction-key-xyz")
    assert "s3cr3t" not in repr(guard)


@pytest.mark.parametrize("mode", MODES)
def test_a_path_through_a_list_and_a_dict_redacts_each_item(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    def send(cards: list[dict[str, str]], headers: dict[str, str]) -> int:
        return len(cards)

    tool = define(guard, mode, send, redact=("cards.number", "headers.authorization"))
    provider.policy = deny_after(0.0)
    run(
        tool,
        [{"number": "1111", "name": "a"}, {"number": "2222", "name": "b"}],
        {"authorization": "Bearer tok", "accept": "json"},
    )
    (request,) = provider.requests()
    cards = request.arguments["cards"]
    assert ["a", "b"] == [c["name"] for c in cards]
    assert marker_digest(cards[0]["number"]) != marker_digest(cards[1]["number"])
    marker_digest(request.arguments["headers"]["authorization"])
    assert "json" == request.arguments["headers"]["accept"]


def test_a_path_into_a_value_that_is_not_an_object_hides_all_of_it(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    @guard.requires_approval(redact=("card.number",))
    def pay(card: Any) -> None: ...

    provider.policy = deny_after(0.0)
    pay("4111 1111 1111 1111")
    marker_digest(provider.requests()[0].arguments["card"])


@pytest.mark.parametrize("mode", MODES)
def test_a_redact_function_hides_what_it_changes_with_markers_of_the_real_value(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    def scrub(args: dict[str, Any]) -> dict[str, Any]:
        args["token"] = "***"  # changed: hidden
        args["extra"] = "shown to nobody"  # added: dropped
        args["note"] = "a different note"  # changed: hidden, never shown as this
        return args

    def call_api(token: str, note: str, n: int) -> int:
        return n

    tool = define(guard, mode, call_api, redact=scrub)
    provider.policy = approve_after(0.05)
    assert 3 == run(tool, "tok_SECRET", "hello", 3)
    (request,) = provider.requests()
    assert {"token", "note", "n"} == set(request.arguments)
    marker_digest(request.arguments["token"])
    marker_digest(request.arguments["note"])
    assert 3 == request.arguments["n"]
    assert "SECRET" not in json.dumps(request.arguments)


@pytest.mark.parametrize("mode", MODES)
def test_a_redact_function_that_fails_sends_nothing_and_does_not_run(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    ran: list[Any] = []

    def broken(args: dict[str, Any]) -> Any:
        raise RuntimeError("oops SECRET")

    def call_api(token: str) -> None:
        ran.append(token)

    tool = define(guard, mode, call_api, redact=broken)
    out = run(tool, "tok_SECRET")
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.NOT_OBTAINED
    assert "redact function failed" in out.message
    assert "SECRET" not in out.to_json()
    assert [] == provider.requests() and [] == ran


@pytest.mark.parametrize("mode", MODES)
def test_arguments_that_hold_a_forged_marker_are_refused(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    ran: list[Any] = []

    def transfer(to: dict[str, Any], amount: int) -> None:
        ran.append(to)

    tool = define(guard, mode, transfer)
    out = run(tool, {"account": {"$redacted": "0123456789ab"}}, 5)
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.NOT_OBTAINED
    assert "$redacted" in out.message
    assert [] == provider.requests() and [] == ran


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"redact": ("nope",)}, "has no parameter 'nope'"),
        ({"redact": ("amount.x..y",)}, "names joined by dots"),
        ({"redact": "amount"}, "not a string"),
        ({"redact": ("amount",), "editable": ("amount",)}, "both redacted and editable"),
        ({"redact": ("payment_id.inner",), "editable": ("payment_id",)}, "both redacted"),
        ({"editable": ("nope",)}, "nope"),
        ({"editable": "amount"}, "not a string"),
        ({"messages": {"denied": ""}}, "messages"),
        ({"messages": {"nope": "x"}}, "not an ag.Reason"),
        ({"on_event": "print"}, "on_event must be a callable"),
    ],
)
def test_bad_policy_options_raise_at_decoration(
    guard: ag.Guard, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        guard.requires_approval(**options)(refund([]))


def test_an_editable_parameter_without_a_convertible_annotation_raises(guard: ag.Guard) -> None:
    def untyped(a, b: int):  # type: ignore[no-untyped-def]
        return a

    def anything(a: Any) -> None: ...

    def objects(a: Card) -> None: ...

    for fn in (untyped, anything, objects):
        with pytest.raises(ValueError):
            guard.requires_approval(editable=("a",))(fn)


@pytest.mark.parametrize("mode", MODES)
def test_an_approved_edit_runs_the_tool_with_the_new_values(
    provider: LocalProvider, guard: ag.Guard, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[Any] = []
    events: list[Any] = []
    tool = define(guard, mode, refund(ran), editable=("amount", "currency"), on_event=events.append)
    provider.policy = edit_to(amount=2500)
    with caplog.at_level(logging.WARNING, "approval_guard"):
        out = run(tool, "pay_1", 4900)
    assert {"refunded": 2500, "currency": "GBP"} == out
    assert [("pay_1", 2500, "GBP")] == ran
    assert type(ran[0][1]) is int
    (request,) = provider.requests()
    assert ("amount", "currency") == tuple(provider.store.get_request(request.id).editable)
    (edited,) = [e for e in events if isinstance(e, ag.ArgumentsEdited)]
    assert 4900 == edited.before["amount"] and 2500 == edited.after["amount"]
    assert ("amount",) == edited.changed
    assert any(r.levelno == logging.WARNING and "4900 -> 2500" in r.message for r in caplog.records)
    row = guard.ledger.get(request.id)
    assert row is not None
    expected = hashlib.sha256(
        canonical_json({"payment_id": "pay_1", "amount": 2500, "currency": "GBP"}).encode()
    ).hexdigest()
    assert expected == row.arguments_digest
    kinds = [type(e) for e in events]
    assert kinds.index(ag.Decided) < kinds.index(ag.ArgumentsEdited) < kinds.index(ag.ToolStarted)


@pytest.mark.parametrize("mode", MODES)
def test_edits_convert_to_each_annotation(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    got: list[Any] = []

    def book(
        amount: Decimal,
        on: date,
        currency: Currency,
        ref: uuid.UUID,
        tags: list[str],
        limit: int | None = None,
    ) -> str:
        got.append((amount, on, currency, ref, tags, limit))
        return "booked"

    tool = define(guard, mode, book, editable=("amount", "on", "currency", "ref", "tags", "limit"))
    new_ref = uuid.UUID(int=7)
    provider.policy = edit_to(
        amount="10.05", on="2027-03-04", currency="EUR", ref=str(new_ref), tags=["x"], limit=3
    )
    assert "booked" == run(
        tool, Decimal("9.99"), date(2026, 1, 1), Currency.GBP, uuid.UUID(int=1), []
    )
    assert [(Decimal("10.05"), date(2027, 3, 4), Currency.EUR, new_ref, ["x"], 3)] == got
    assert type(got[0][2]) is Currency


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"amount": "lots"}, id="not-a-number"),
        pytest.param({"amount": True}, id="bool-for-int"),
        pytest.param({"amount": 25.5}, id="float-for-int"),
        pytest.param({"currency": 7}, id="int-for-str"),
        pytest.param({"amount": {"$redacted": "0123456789ab"}}, id="a-marker"),
    ],
)
def test_an_edit_that_does_not_convert_never_runs(
    provider: LocalProvider, guard: ag.Guard, mode: str, change: dict[str, Any]
) -> None:
    ran: list[Any] = []
    tool = define(guard, mode, refund(ran), editable=("amount", "currency"))

    def policy(provider: LocalProvider, request: Any) -> None:
        try:
            provider.approve(request.id, arguments={**request.arguments, **change})
        except ValueError:
            provider.approve(request.id)  # the provider refused it: not this test's case

    provider.policy = policy
    out = run(tool, "pay", 4900)
    if change == {"amount": {"$redacted": "0123456789ab"}}:
        # The local provider refuses to put a marker into an edit, so nothing was edited.
        assert {"refunded": 4900, "currency": "GBP"} == out
        return
    assert isinstance(out, ag.NotRun), out
    assert ag.Reason.NOT_OBTAINED is out.reason
    assert "approved edit could not be applied" in out.message
    assert "changes that could not be applied" in str(out)
    assert [] == ran
    (request,) = provider.requests()
    assert guard.ledger.get(request.id) is None  # nothing claimed: nothing started


def hostile(
    provider: LocalProvider, rewrite: Callable[[dict[str, Any]], None]
) -> Iterator[ag.Guard]:
    proxy = RewritingProxy(provider.url, rewrite)
    guard = make_guard(provider, base_url=proxy.url, allow_insecure_http=True)
    try:
        yield guard
    finally:
        guard.close()
        proxy.close()


def _approved_with(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def rewrite(obj: dict[str, Any]) -> None:
        decision = obj.get("decision")
        if isinstance(decision, dict) and decision.get("status") == "approved":
            decision["arguments"] = {**obj["arguments"], **changes}

    return rewrite


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("rewrite", "words"),
    [
        pytest.param(_approved_with(payment_id="pay_evil"), "'payment_id'", id="non-editable"),
        pytest.param(_approved_with(amount="9"), "does not convert", id="bad-type"),
        pytest.param(_approved_with(extra=1), "adds or leaves out", id="added-name"),
    ],
)
def test_a_hostile_edit_never_runs_the_tool(
    provider: LocalProvider, mode: str, rewrite: Callable[[dict[str, Any]], None], words: str
) -> None:
    provider.policy = approve_after(0.05)
    for guard in hostile(provider, rewrite):
        ran: list[Any] = []
        tool = define(guard, mode, refund(ran), editable=("amount",))
        out = run(tool, "pay", 4900)
        assert isinstance(out, ag.NotRun), out
        assert ag.Reason.NOT_OBTAINED is out.reason
        assert words in out.message
        assert [] == ran


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_from_a_provider_never_told_the_field_was_editable_never_runs(
    provider: LocalProvider, mode: str
) -> None:
    """No editable= on the tool; a provider invents an edit anyway."""
    provider.policy = approve_after(0.05)
    for guard in hostile(provider, _approved_with(amount=1)):
        ran: list[Any] = []
        out = run(define(guard, mode, refund(ran)), "pay", 4900)
        assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
        assert "offered no argument for editing" in out.message
        assert [] == ran


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_the_provider_does_not_echo_as_editable_never_runs(
    provider: LocalProvider, mode: str
) -> None:
    def rewrite(obj: dict[str, Any]) -> None:
        obj.pop("editable", None)
        _approved_with(amount=1)(obj)

    provider.policy = approve_after(0.05)
    for guard in hostile(provider, rewrite):
        ran: list[Any] = []
        out = run(define(guard, mode, refund(ran), editable=("amount",)), "pay", 4900)
        assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
        assert "does not list 'amount' as editable" in out.message
        assert [] == ran


@pytest.mark.parametrize("mode", MODES)
def test_a_changed_tool_name_never_runs(provider: LocalProvider, mode: str) -> None:
    def rewrite(obj: dict[str, Any]) -> None:
        if isinstance(obj.get("decision"), dict):
            obj["tool"] = "delete_everything"

    provider.policy = approve_after(0.05)
    for guard in hostile(provider, rewrite):
        ran: list[Any] = []
        out = run(define(guard, mode, refund(ran), editable=("amount",)), "pay", 4900)
        assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
        assert [] == ran


def test_an_unchanged_decision_arguments_object_is_no_edit(provider: LocalProvider) -> None:
    """A provider that echoes the whole arguments object unchanged: the call runs as sent."""
    provider.policy = approve_after(0.05)
    for guard in hostile(provider, _approved_with()):
        ran: list[Any] = []
        out = run(define(guard, "sync", refund(ran)), "pay", 4900)
        assert {"refunded": 4900, "currency": "GBP"} == out


def test_the_edit_is_the_decision_the_reread_shows(provider: LocalProvider) -> None:
    """decided_by from the provider reaches the Decided event."""

    def rewrite(obj: dict[str, Any]) -> None:
        if isinstance(obj.get("decision"), dict):
            obj["decision"]["decided_by"] = "ada@example.com"

    provider.policy = approve_after(0.05)
    for guard in hostile(provider, rewrite):
        events: list[Any] = []
        out = run(define(guard, "sync", refund([]), on_event=events.append), "pay", 1)
        assert {"refunded": 1, "currency": "GBP"} == out
        (decided,) = [e for e in events if isinstance(e, ag.Decided)]
        assert "ada@example.com" == decided.decided_by and "approved" == decided.status


# --------------------------------------------------------------------------- events


@pytest.mark.parametrize("mode", MODES)
def test_events_tell_the_harness_what_is_happening(provider: LocalProvider, mode: str) -> None:
    guard_events: list[Any] = []
    tool_events: list[Any] = []
    guard = make_guard(provider, on_event=guard_events.append, poll_wait="1s")
    tool = define(guard, mode, refund([]), on_event=tool_events.append)
    provider.policy = approve_after(1.6)
    assert {"refunded": 1, "currency": "GBP"} == run(tool, "pay", 1)
    assert guard_events == tool_events
    kinds = [type(e) for e in guard_events]
    assert ag.RequestCreated is kinds[0]
    assert ag.StillWaiting in kinds
    assert [ag.Decided, ag.ToolStarted, ag.ToolFinished] == kinds[-3:]
    created = guard_events[0]
    (request,) = provider.requests()
    assert request.id == created.request_id and request.deadline_at == created.deadline_at
    waiting = [e for e in guard_events if isinstance(e, ag.StillWaiting)]
    assert all(0 < e.seconds_left <= 120 for e in waiting)
    for event in guard_events:
        with pytest.raises(AttributeError):
            event.tool = "x"  # frozen


@pytest.mark.parametrize("mode", MODES)
def test_a_call_that_does_not_run_ends_with_call_not_run(
    provider: LocalProvider, mode: str
) -> None:
    events: list[Any] = []
    guard = make_guard(provider, on_event=events.append)
    provider.policy = deny_after(0.05, "no")
    out = run(define(guard, mode, refund([])), "pay", 1)
    assert isinstance(events[-1], ag.CallNotRun) and out == events[-1].not_run
    (decided,) = [e for e in events if isinstance(e, ag.Decided)]
    assert "denied" == decided.status and "no" == decided.note


@pytest.mark.parametrize("mode", MODES)
def test_a_callback_that_raises_never_changes_the_outcome(
    provider: LocalProvider, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[Any] = []

    def bad(event: Any) -> None:
        calls.append(event)
        raise RuntimeError("callback broke")

    guard = make_guard(provider, on_event=bad)
    provider.policy = approve_after(0.05)
    with caplog.at_level(logging.WARNING, "approval_guard"):
        assert {"refunded": 1, "currency": "GBP"} == run(define(guard, mode, refund([])), "p", 1)
    assert len(calls) >= 3
    assert 1 == sum("on_event callback raised" in r.message for r in caplog.records)


# --------------------------------------------------------------------------- messages


@pytest.mark.parametrize("mode", MODES)
def test_each_reason_tells_the_model_what_to_do_next(provider: LocalProvider, mode: str) -> None:
    guard = make_guard(provider)
    provider.policy = deny_after(0.05, "no")
    out = run(define(guard, mode, refund([])), "pay", 1)
    assert str(out).startswith(out.message)
    assert "Do not retry the same call" in str(out)
    assert out.advice in str(out) and out.to_dict()["advice"] == out.advice
    provider.policy = None
    short = make_guard(provider, harness_limit="4s", return_margin="1s", deadline_margin="1s")
    out = run(define(short, mode, refund([])), "pay", 1)
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.NOT_OBTAINED
    assert "Nobody denied it" in str(out)


@pytest.mark.parametrize("mode", MODES)
def test_messages_override_the_advice_per_tool(provider: LocalProvider, mode: str) -> None:
    guard = make_guard(provider)
    tool = define(
        guard,
        mode,
        refund([]),
        messages={ag.Reason.DENIED: "Tell the customer a manager said no.", "cancelled": "x"},
        on_not_run=str,
    )
    provider.policy = deny_after(0.05, "no")
    out = run(tool, "pay", 1)
    assert isinstance(out, str)
    assert out.endswith("Tell the customer a manager said no.")
    assert "A person denied" in out


@pytest.mark.parametrize("mode", MODES)
def test_an_edited_number_is_run_exactly_or_not_at_all(
    provider: LocalProvider, guard: ag.Guard, mode: str
) -> None:
    """A JSON number reaches a Decimal exactly; one a float cannot hold never runs rounded."""
    from approval_guard._codec.exact_json import JSONNumber

    got: list[Any] = []

    def pay(exact: Decimal, ratio: float) -> str:
        got.append((exact, ratio))
        return "paid"

    tool = define(guard, mode, pay, editable=("exact", "ratio"))
    provider.policy = edit_to(exact=JSONNumber("0.10000000000000000001"))
    assert "paid" == run(tool, Decimal("1"), 0.5)
    assert [(Decimal("0.10000000000000000001"), 0.5)] == got
    provider.policy = edit_to(ratio=JSONNumber("0.10000000000000000001"))
    out = run(tool, Decimal("1"), 0.5)
    assert isinstance(out, ag.NotRun) and "does not convert" in out.message
    provider.policy = edit_to(ratio=0.25)
    assert "paid" == run(tool, Decimal("1"), 0.5)
    assert (Decimal("1"), 0.25) == got[-1]


@pytest.mark.parametrize(
    "scrub",
    [
        pytest.param(lambda args: None, id="returns-none"),
        pytest.param(lambda args: [args], id="returns-a-list"),
        pytest.param(lambda args: "redacted!", id="returns-a-string"),
    ],
)
def test_a_redact_function_returning_no_arguments_object_sends_nothing(
    provider: LocalProvider, guard: ag.Guard, scrub: Callable[[Any], Any]
) -> None:
    @guard.requires_approval(redact=scrub)
    def call_api(token: dict[str, Any]) -> None: ...

    out = call_api({"x": "tok_SECRET"})
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
    assert "SECRET" not in out.to_json()
    assert [] == provider.requests()


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


def test_a_refused_call_tells_the_model_not_to_retry_it_unchanged(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    @guard.requires_approval()
    def transfer(to: dict[str, Any]) -> None: ...

    out = transfer({"$redacted": "0123456789ab"})
    assert isinstance(out, ag.NotRun)
    assert "Do not retry the same call unchanged" in str(out)


@pytest.mark.parametrize(
    "value", [0, -7, 10**40, True, False, None, "x", "é\u2028", 1.5, [1, "a"], {"b": None}]
)
def test_a_marker_digests_the_values_canonical_json(value: Any) -> None:
    """The scalar fast path gives the digest of the value's canonical JSON, like any value."""
    import hmac as _hmac

    from approval_guard._options.redact import marker

    key = b"k" * 32
    text = canonical_json(value).encode("utf-8")
    expected = _hmac.new(key, text, hashlib.sha256).hexdigest()[:12]
    assert {"$redacted": expected} == marker(value, key)
