"""editable= (issue 11): a reviewer's edit runs converted to the annotated type, or not at
all; an edit a provider invents, or one nobody offered, never runs.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.exact_json import canonical_json
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard
from tests.support.hostile import HostileProvider, approved, hostile_guard, short_refund
from tests.support.proxies import RewritingProxy
from tests.support.tools import MODES, Card, Currency, define, edit_to, refund, run


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
    stored = provider.store.get_request(request.id)
    assert stored is not None
    assert ("amount", "currency") == tuple(stored.editable)
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


def behind_rewriting_proxy(
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
    for guard in behind_rewriting_proxy(provider, rewrite):
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
    for guard in behind_rewriting_proxy(provider, _approved_with(amount=1)):
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
    for guard in behind_rewriting_proxy(provider, rewrite):
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
    for guard in behind_rewriting_proxy(provider, rewrite):
        ran: list[Any] = []
        out = run(define(guard, mode, refund(ran), editable=("amount",)), "pay", 4900)
        assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
        assert [] == ran


def test_an_unchanged_decision_arguments_object_is_no_edit(provider: LocalProvider) -> None:
    """A provider that echoes the whole arguments object unchanged: the call runs as sent."""
    provider.policy = approve_after(0.05)
    for guard in behind_rewriting_proxy(provider, _approved_with()):
        ran: list[Any] = []
        out = run(define(guard, "sync", refund(ran)), "pay", 4900)
        assert {"refunded": 4900, "currency": "GBP"} == out


def test_the_edit_is_the_decision_the_reread_shows(provider: LocalProvider) -> None:
    """decided_by from the provider reaches the Decided event."""

    def rewrite(obj: dict[str, Any]) -> None:
        if isinstance(obj.get("decision"), dict):
            obj["decision"]["decided_by"] = "ada@example.com"

    provider.policy = approve_after(0.05)
    for guard in behind_rewriting_proxy(provider, rewrite):
        events: list[Any] = []
        out = run(define(guard, "sync", refund([]), on_event=events.append), "pay", 1)
        assert {"refunded": 1, "currency": "GBP"} == out
        (decided,) = [e for e in events if isinstance(e, ag.Decided)]
        assert "ada@example.com" == decided.decided_by and "approved" == decided.status


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


# Found in the adversarial review of the guard side (what it does with answers).
@pytest.mark.parametrize(
    ("edited", "runs"),
    [
        ({"payment_id": "p", "amount": 1}, True),  # the same arguments, echoed
        ({"payment_id": "p", "amount": 999999}, False),
        ({"payment_id": "p"}, False),
        ({"payment_id": "p", "amount": 1, "to": "attacker"}, False),
        ("not an object", False),
    ],
)
def test_an_approval_that_edits_arguments_never_offered_as_editable_does_not_run(
    hostile: Callable[..., HostileProvider], edited: Any, runs: bool
) -> None:
    """API 1.1: no name was sent as editable, so decision.arguments may only repeat the call."""
    p = hostile(create=lambda r, _: (201, approved(r, arguments=edited)))
    ran: list[Any] = []
    out = short_refund(hostile_guard(p), ran)("p", 1)
    if runs:
        assert "refunded" == out and [("p", 1)] == ran
    else:
        assert [] == ran
        assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason, out


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
@pytest.mark.parametrize(
    "editable",
    [("amount", 1), None, 5, (("amount",),)],
    ids=["mixed", "none", "int", "nested"],
)
def test_a_bad_editable_option_raises_value_error(guard: ag.Guard, editable: Any) -> None:
    """editable= that is not a collection of names is a ValueError at decoration, not TypeError."""
    with pytest.raises(ValueError, match="editable"):
        guard.requires_approval(editable=editable)(refund([]))
