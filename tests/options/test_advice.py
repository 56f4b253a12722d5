"""What a NotRun advises the model (issue 11): a sentence for each reason, messages= per tool,
and never "nobody denied it" of a call somebody denied.
"""

from __future__ import annotations

from typing import Any

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider, deny_after
from tests.support.guards import make_guard, refund_tool
from tests.support.tools import MODES, define, refund, run


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


def test_a_refused_call_tells_the_model_not_to_retry_it_unchanged(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    @guard.requires_approval()
    def transfer(to: dict[str, Any]) -> None: ...

    out = transfer({"$redacted": "0123456789ab"})
    assert isinstance(out, ag.NotRun)
    assert "Do not retry the same call unchanged" in str(out)


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


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
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
