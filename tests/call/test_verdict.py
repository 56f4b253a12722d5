"""What an answer must say for the tool to run: the echoed call compared as JSON, and the
arguments as they were when the request was made.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.serialize import same_json
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard


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


_SCALAR = st.sampled_from([None, True, False, 0, 1, 5, 0.0, 1.0, 5.0, -0.0, "", "1", "a", math.nan])
_FLAT = st.dictionaries(st.sampled_from("abc"), _SCALAR, max_size=3)


def _same_scalar(a: Any, b: Any) -> bool:
    """Two JSON scalars are one value: same type and equal, or int and float and equal."""
    numbers = (int, float)
    if type(a) is not type(b):
        return type(a) in numbers and type(b) in numbers and a == b
    return bool(a == b)


@given(_FLAT, _FLAT)
def test_flat_echoes_are_compared_value_by_value(sent: dict[str, Any], echoed: Any) -> None:
    """An echo of plain values is the call only when every value is the same JSON (NaN never)."""
    expected = sent.keys() == echoed.keys() and all(
        _same_scalar(echoed[key], value) for key, value in sent.items()
    )
    assert expected == same_json(sent, echoed) == same_json({"x": [sent]}, {"x": [echoed]})


# Found in the adversarial review of the guard side (what it does with answers).
def test_arguments_changed_while_waiting_do_not_run(provider: LocalProvider) -> None:
    """The caller's list changes after the request was made: what would run was never seen."""
    payees = ["alice"]

    def mutate_then_approve(provider: LocalProvider, request: Any) -> None:
        payees.append("mallory")
        provider.approve(request.id)

    provider.policy = mutate_then_approve
    ran: list[Any] = []

    @make_guard(provider).requires_approval(timeout="1m")
    def pay(to: list[str]) -> str:
        ran.append(list(to))
        return "paid"

    out = pay(payees)
    [request] = provider.requests()
    assert {"to": ["alice"]} == request.arguments
    assert [] == ran
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason, out
    # The approval was not used up: nothing ran.
    assert None is make_guard(provider).ledger.get(request.id)
