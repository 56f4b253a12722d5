"""Durations, serialisation, signatures, option validation, the public surface."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.duration import canonical, format_duration, parse_duration_string
from approval_guard._codec.serialize import bind, dumps, to_json_value

BASE = "https://approvals.example.com"


def test_public_surface_is_pinned() -> None:
    """__all__ changes only on purpose."""
    assert sorted(ag.__all__) == ag.__all__
    assert ag.__all__ == [
        "ApprovalGuardError",
        "ApprovalSkipped",
        "ArgumentSerializationError",
        "ArgumentsEdited",
        "CallNotRun",
        "Clock",
        "ConfigurationError",
        "Decided",
        "Event",
        "Execution",
        "Guard",
        "HarnessCall",
        "Ledger",
        "LedgerError",
        "MemoryLedger",
        "NotRun",
        "PostgresLedger",
        "Reason",
        "RequestCreated",
        "SQLiteLedger",
        "StillWaiting",
        "SystemClock",
        "ToolFinished",
        "ToolStarted",
        "harness_call",
        "requires_approval",
    ]


@pytest.mark.parametrize(
    ("expected", "value"),
    [
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("45s", 45),
        ("30m", "30m"),
        ("1m30s", "90s"),
        ("2h", "2h"),
        ("1h5s", "1h5s"),
        ("1m", 60.9),
    ],
)
def test_durations_are_sent_in_canonical_form(expected: str, value: Any) -> None:
    """Strings, timedeltas and seconds all become the API's canonical duration."""
    assert expected == canonical(value)


@pytest.mark.parametrize(
    "bad",
    [
        "0s",
        "-5s",
        "5",
        "m",
        "30m1h",
        "1h1h",
        "1d",
        "",
        " ",
        0,
        -1,
        timedelta(0),
        float("nan"),
        float("inf"),
        "1.5m",
    ],
)
def test_bad_durations_raise_value_error(bad: Any) -> None:
    """Zero, negative and malformed durations are refused."""
    with pytest.raises(ValueError):
        canonical(bad)


@given(st.integers(min_value=1, max_value=10 * 24 * 3600))
def test_duration_round_trip(seconds: int) -> None:
    """Any whole number of seconds survives formatting and parsing."""
    assert seconds == parse_duration_string(format_duration(seconds))


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


def _guard(**overrides: Any) -> ag.Guard:
    options: dict[str, Any] = {"base_url": BASE, "credential": "agi_token"}
    options.update(overrides)
    return ag.Guard(**options)


def test_decorated_function_keeps_its_identity() -> None:
    """__name__, __doc__, __wrapped__ and the signature survive decoration."""

    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        """Refund a payment."""
        return {}

    guarded = _guard().requires_approval(timeout="30m")(issue_refund)
    assert "issue_refund" == guarded.__name__
    assert "Refund a payment." == guarded.__doc__
    assert issue_refund is guarded.__wrapped__  # type: ignore[attr-defined]
    assert inspect.signature(issue_refund) == inspect.signature(guarded)


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": "0s"},
        {"timeout": "-1m"},
        {"timeout": "soon"},
        {"timeout": "25h"},
        {"timeout": 1.5},
        {"tool": ""},
        {"tool": "x" * 201},
    ],
)
def test_bad_decorator_options_raise_when_applied(options: dict[str, Any]) -> None:
    """A bad option raises ValueError at decoration, before any call."""
    with pytest.raises(ValueError):
        _guard().requires_approval(**options)


def test_exclude_of_unknown_parameter_raises() -> None:
    """exclude must name real parameters."""
    with pytest.raises(ValueError, match="ctx"):
        _guard().requires_approval(exclude=("ctx",))(lambda x: x)


@pytest.mark.parametrize(
    "options",
    [
        {"base_url": "http://approvals.example.com"},
        {"base_url": "ftp://approvals.example.com"},
        {"base_url": "not a url"},
        {"base_url": "https://user:pw@approvals.example.com"},
        {"credential": ""},
        {"credential": "has space"},
        {"credential": "line\nbreak"},
        {"harness_limit": "0s"},
        {"harness_limit": "10s", "return_margin": "5s", "deadline_margin": "5s"},
        {"poll_wait": "-3s"},
        {"return_margin": "nope"},
        {"ledger": object()},
    ],
)
def test_bad_guard_options_raise(options: dict[str, Any]) -> None:
    """Every Guard option is validated at construction."""
    with pytest.raises(ValueError):
        _guard(**options)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8765", "http://localhost:1", "http://[::1]:9"])
def test_plain_http_to_loopback_is_allowed(url: str) -> None:
    """Plain http is fine to this machine."""
    assert url == _guard(base_url=url).base_url


def test_plain_http_elsewhere_needs_explicit_opt_in() -> None:
    """allow_insecure_http=True permits http to another host."""
    assert (
        "http://10.0.0.1" == _guard(base_url="http://10.0.0.1", allow_insecure_http=True).base_url
    )


def test_credential_never_in_repr_or_errors() -> None:
    """The credential does not appear in reprs or validation errors."""
    guard = _guard(credential="agi_supersecret")
    assert "agi_supersecret" not in repr(guard)
    assert "agi_supersecret" not in repr(guard._client)
    with pytest.raises(ValueError) as info:
        _guard(credential="agi_supersecret with space")
    assert "supersecret" not in str(info.value)


def test_harness_call_validates_its_options() -> None:
    """harness_call rejects bad keys and limits at once."""
    with pytest.raises(ValueError), ag.harness_call(idempotency_key=""):
        pass
    with pytest.raises(ValueError), ag.harness_call(idempotency_key="x" * 256):
        pass
    with pytest.raises(ValueError), ag.harness_call(limit="0s"):
        pass


def test_module_level_decorator_validates_now_and_reads_env_at_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Module-level requires_approval checks options at once and the environment at call time."""
    with pytest.raises(ValueError):
        ag.requires_approval(timeout="0s")
    monkeypatch.delenv("APPROVAL_GUARD_URL", raising=False)

    @ag.requires_approval(timeout="30m")
    def delete_user(user_id: str) -> None: ...

    with pytest.raises(ag.ConfigurationError, match="APPROVAL_GUARD_URL"):
        delete_user("u1")


def test_not_run_is_easy_to_hand_to_a_model() -> None:
    """str() is the message, it is falsy, and it serialises to JSON."""
    out = ag.NotRun(reason=ag.Reason.DENIED, message="A person denied it.", tool="t")
    assert "A person denied it." == str(out)
    assert not out
    assert '"reason": "denied"' in out.to_json()
    assert "denied" == ag.Reason.DENIED == str(ag.Reason.DENIED)


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31), timezones=st.none()
    ),
    st.sampled_from(
        ["%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ", "ms", "%Y-%m-%dT%H:%M:%S+02:00"]
    ),
)
def test_timestamp_parsing_agrees_with_rfc3339(moment: datetime, form: str) -> None:
    """The fast path and the general parser read every RFC 3339 form the same way."""
    from dateutil.parser import isoparse

    from approval_guard._codec.wire import parse_timestamp

    text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z" if (
        form == "ms"
    ) else moment.strftime(form)
    assert isoparse(text).astimezone(timezone.utc) == parse_timestamp(text, field="t")


def _plain(a: int, b: str = "x", c: float = 1.5) -> None: ...


def _varied(a: int, *rest: int, key: str = "k", **more: Any) -> None: ...


@pytest.mark.parametrize("fn", [_plain, _varied])
@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "y"), {"c": 2.0}), ((), {"a": 1, "b": "z"}), ((1, "y", 3.0), {}),
     ((1, 2, 3, 4), {}), ((), {}), ((1,), {"a": 2}), ((1,), {"nope": 1}), ((1,), {"key": "q"})],
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
