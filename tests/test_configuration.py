"""Guard(...), harness_call(...) and requires_approval(...) check their options when they
are made, and a decorated function keeps its name, docstring and signature.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import approval_guard as ag
from tests.support.tools import refund

BASE = "https://approvals.example.com"


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


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765",
        "http://localhost:1",
        "http://[::1]:9",
        "http://[::ffff:127.0.0.1]:9",
    ],
)
def test_plain_http_to_loopback_is_allowed(url: str) -> None:
    """Plain http is fine to this machine."""
    assert url == _guard(base_url=url).base_url


@pytest.mark.parametrize("url", ["http://10.0.0.1", "http://[::ffff:10.0.0.1]:9", "http://[::]:9"])
def test_plain_http_elsewhere_is_refused(url: str) -> None:
    """Plain http to another machine (a v4-mapped address of one too) is refused by default."""
    with pytest.raises(ValueError, match="non-loopback"):
        _guard(base_url=url)


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
