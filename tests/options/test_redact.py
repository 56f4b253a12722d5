"""redact= (issue 11): a redacted value never reaches the provider, a marker of its digest
stands in for it, the tool gets the real value, and arguments holding a forged marker are
refused. Over real HTTP against the local provider, sync and async (``mode``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.exact_json import canonical_json
from approval_guard.testing import LocalProvider, approve_after, deny_after
from tests.support.guards import make_guard
from tests.support.tools import MODES, Card, define, run


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
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


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
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
