"""Arguments made JSON: plain data in, the same bytes every time, each value as the tool
gets it; what JSON cannot carry raises ArgumentSerializationError and sends nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import uuid
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.serialize import bind, dumps, to_json_value
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: Decimal


@attrs.define
class Box:
    label: str
    corner: Point


def test_arguments_are_made_json() -> None:
    """Decimal, dates, UUID, Enum, dataclasses, attrs, tuples and sets become plain JSON."""
    moment = datetime(2026, 9, 16, 12, 0, tzinfo=timezone.utc)
    value = {
        "amount": Decimal("49.00"),
        "when": moment,
        "day": date(2026, 9, 16),
        "id": uuid.UUID("7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71"),
        "colour": Colour.RED,
        "box": Box("b", Point(1, Decimal("0.1"))),
        "pair": (1, 2),
        "tags": {"b", "a"},
    }
    assert {
        "amount": "49.00",
        "when": "2026-09-16T12:00:00+00:00",
        "day": "2026-09-16",
        "id": "7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71",
        "colour": "red",
        "box": {"label": "b", "corner": {"x": 1, "y": "0.1"}},
        "pair": [1, 2],
        "tags": ["a", "b"],
    } == to_json_value(value)


@pytest.mark.parametrize("bad", [object(), b"bytes", float("nan"), {1: "int key"}, lambda: 1])
def test_unserialisable_argument_raises_type_error(bad: Any) -> None:
    """Anything that is not plain data is a clear TypeError."""
    with pytest.raises(TypeError, match="arguments"):
        to_json_value({"x": bad})


def test_self_referencing_argument_raises() -> None:
    """A cycle is refused instead of recursing forever."""
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(TypeError, match="itself"):
        to_json_value(loop)


@given(st.sets(st.text(max_size=5), max_size=8))
def test_sets_serialise_in_a_stable_order(items: set[str]) -> None:
    """The same set gives the same bytes whatever its iteration order."""
    assert dumps(to_json_value(items)) == dumps(to_json_value(set(sorted(items, reverse=True))))


def test_arguments_bound_with_defaults() -> None:
    """Positional and keyword arguments are bound to names with defaults applied."""

    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> None: ...

    sig = inspect.signature(issue_refund)
    assert {"payment_id": "p", "amount": 1, "currency": "GBP"} == bind(sig, ("p", 1), {})
    assert {"payment_id": "p", "amount": 1} == bind(
        sig, ("p",), {"amount": 1}, exclude=frozenset({"currency"})
    )


def _plain(a: int, b: str = "x", c: float = 1.5) -> None: ...


def _varied(a: int, *rest: int, key: str = "k", **more: Any) -> None: ...


@pytest.mark.parametrize("fn", [_plain, _varied])
@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((1,), {}),
        ((1, "y"), {"c": 2.0}),
        ((), {"a": 1, "b": "z"}),
        ((1, "y", 3.0), {}),
        ((1, 2, 3, 4), {}),
        ((), {}),
        ((1,), {"a": 2}),
        ((1,), {"nope": 1}),
        ((1,), {"key": "q"}),
    ],
)
def test_fast_binding_agrees_with_inspect(fn: Any, args: tuple[Any, ...], kwargs: Any) -> None:
    """The fast binder gives what inspect gives, including the same TypeError for a bad call."""
    from approval_guard._codec.serialize import binder

    sig = inspect.signature(fn)
    try:
        expected: Any = bind(sig, args, kwargs, exclude=frozenset({"c"}))
    except TypeError as exc:
        expected = f"TypeError: {exc}"
    try:
        got: Any = binder(sig, exclude=frozenset({"c"}))(args, kwargs)
    except TypeError as exc:
        got = f"TypeError: {exc}"
    assert expected == got
    if isinstance(expected, dict):
        assert list(expected) == list(got)


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


class UserId(str):
    """A str subclass, as typed ids often are."""


class LyingInt(int):
    def __int__(self) -> int:
        return 1

    def __index__(self) -> int:
        return 1


class LyingFloat(float):
    def __float__(self) -> float:
        return 1.0


class LyingDecimal(Decimal):
    def __str__(self) -> str:
        return "1"


class LyingStr(str):
    def __str__(self) -> str:
        return "someone_else"


# Found in the adversarial review of the guard side (what it does with answers).
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (UserId("payment_123"), "payment_123"),
        (LyingStr("payment_123"), "payment_123"),
        (LyingInt(4900), 4900),
        (LyingFloat(4900.5), 4900.5),
        (LyingDecimal("4900"), "4900"),
    ],
)
def test_a_subclass_argument_is_sent_and_run_as_its_own_value(
    provider: LocalProvider, value: Any, shown: Any
) -> None:
    """A str/int/float/Decimal subclass is sent as the value the tool gets, not its conversions'."""
    p = provider
    p.policy = approve_after(0.0)
    ran: list[Any] = []

    @make_guard(p).requires_approval(timeout="1m")
    def issue_refund(payment_id: Any) -> str:
        ran.append(payment_id)
        return "done"

    out = issue_refund(value)
    [request] = p.requests()
    assert {"payment_id": shown} == request.arguments
    assert type(shown) is type(request.arguments["payment_id"])
    assert "done" == out, out
    assert [value] == ran


def _nested(depth: int, make: Any) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = make(value)
    return value


@pytest.mark.parametrize(
    "argument",
    [
        pytest.param(10**5000, id="5000-digit-int"),
        pytest.param(-(10**4300), id="4301-digit-negative-int"),
        pytest.param(_nested(5000, lambda inner: [inner]), id="5000-deep-list"),
        pytest.param(_nested(5000, lambda inner: {"a": inner}), id="5000-deep-dict"),
        pytest.param(_nested(65, lambda inner: (inner,)), id="65-deep-tuple"),
        pytest.param({10**5000: 1}, id="huge-int-key"),
        pytest.param("\ud800", id="lone-surrogate"),
        pytest.param({"k\udfff": 1}, id="lone-surrogate-key"),
    ],
)
def test_an_argument_json_cannot_carry_raises_argument_serialization_error(
    provider: LocalProvider, argument: Any
) -> None:
    """Whatever makes JSON fail raises ArgumentSerializationError (a TypeError); nothing is sent."""
    guard = make_guard(provider)

    @guard.requires_approval(timeout="30s")
    def store(value: Any) -> None:
        raise AssertionError("must not run")

    with pytest.raises(ag.ArgumentSerializationError) as info:
        store(argument)
    assert isinstance(info.value, TypeError)
    assert len(str(info.value)) < 1000
    assert [] == provider.requests()


def test_nesting_up_to_the_limit_and_long_integers_are_sent(
    provider: LocalProvider,
) -> None:
    """64 levels deep and a 4,300-digit integer are still plain JSON: they go for approval."""
    guard = make_guard(provider, harness_limit="5s", return_margin="1s", deadline_margin="1s")

    @guard.requires_approval(timeout="2s")
    def store(value: Any, big: int) -> None:
        raise AssertionError("must not run")

    out = store(_nested(63, lambda inner: [inner]), 10**4299)
    assert ag.Reason.NOT_OBTAINED == out.reason  # type: ignore[union-attr]
    (request,) = provider.requests()
    big = request.arguments["big"]  # the provider keeps a number this long as its source text
    assert str(10**4299) == str(getattr(big, "text", big))
