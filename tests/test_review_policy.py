"""Adversarial review of issue 11 (when=, redact=, editable=, events, advice): each test a bug found.

Real HTTP against the local provider, sync and async where the path differs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider
from tests.test_integration import make_guard
from tests.test_policy import MODES, define, guard, p, refund, run  # noqa: F401 (fixtures)


@pytest.mark.parametrize("mode", MODES)
def test_a_forged_marker_refusal_never_carries_the_redacted_secret(
    p: LocalProvider, guard: ag.Guard, mode: str  # noqa: F811
) -> None:
    """The NotRun for arguments holding a forged marker shows redacted values, never the secret."""
    events: list[Any] = []

    def pay(api_key: str, memo: Any) -> None: ...

    tool = define(guard, mode, pay, redact=("api_key",), on_event=events.append)
    out = run(tool, "sk_live_SECRET123", {"$redacted": "0123456789ab"})
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED is out.reason
    shown = out.to_json() + repr(out) + repr(events)
    assert "SECRET123" not in shown
    assert [] == p.requests()


@pytest.mark.parametrize("mode", MODES)
def test_a_redacted_secret_that_is_not_valid_unicode_is_hidden_not_raised(
    p: LocalProvider, guard: ag.Guard, mode: str  # noqa: F811
) -> None:
    """A lone surrogate in a redacted value is never sent, so it cannot make the call raise."""
    got: list[Any] = []

    def login(user: str, pin: str) -> str:
        got.append(pin)
        return "in"

    from approval_guard.testing import approve_after

    p.policy = approve_after(0.05)
    tool = define(guard, mode, login, redact=("pin",))
    secret = "12\ud80034"
    assert "in" == run(tool, "ada", secret)
    assert [secret] == got
    (request,) = p.requests()
    assert {"$redacted"} == set(request.arguments["pin"])


@pytest.mark.parametrize(
    "editable",
    [("amount", 1), None, 5, (("amount",),)],
    ids=["mixed", "none", "int", "nested"],
)
def test_a_bad_editable_option_raises_value_error(guard: ag.Guard, editable: Any) -> None:  # noqa: F811
    """editable= that is not a collection of names is a ValueError at decoration, not TypeError."""
    with pytest.raises(ValueError, match="editable"):
        guard.requires_approval(editable=editable)(refund([]))
