"""The guard lists where it redacted (API 1.3 ``redacted``); an older provider still works."""

from __future__ import annotations

import json
from typing import Any

import requests

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard
from tests.support.proxies import RewritingProxy

#: The create fields an API 1.2 provider knows; it refuses any other as the local one did.
FIELDS_1_2 = {"tool", "arguments", "timeout", "editable", "requested_by"}


def refund(guard: ag.Guard, ran: list[Any]) -> Any:
    @guard.requires_approval(timeout="30m", redact=("api_key", "card.number"))
    def issue_refund(payment_id: str, api_key: str, card: dict[str, Any]) -> str:
        ran.append((payment_id, api_key, card))
        return "ran"

    return issue_refund


def test_the_guard_lists_the_places_it_redacted() -> None:
    """The create carries the JSON Pointers of its markers; the page shows exactly those."""
    ran: list[Any] = []
    with LocalProvider(policy=approve_after(0)) as provider:
        guard = make_guard(provider)
        try:
            out = refund(guard, ran)("p_1", "sk_live_x", {"number": "4242", "holder": "A"})
        finally:
            guard.close()
        (request,) = provider.requests()
        listed = requests.get(
            f"{provider.url}/v1/requests",
            headers={"Authorization": f"Bearer {provider.reviewer_credential}"},
            timeout=5,
        ).json()["requests"]

    assert "ran" == out
    assert ("/api_key", "/card/number") == request.redacted
    assert ["api_key", "card.number"] == listed[0]["display"]["redacted"]


def test_a_call_without_redaction_sends_no_redacted_field() -> None:
    """Nothing redacted: the create carries no ``redacted`` (an older provider takes it as ever)."""
    bodies: list[bytes] = []

    def record(method: str, path: str, body: bytes | None) -> None:
        if method == "POST" and path == "/v1/requests" and body is not None:
            bodies.append(body)

    with LocalProvider(policy=approve_after(0)) as provider:
        proxy = RewritingProxy(provider.url, refuse=record)
        guard = make_guard(provider, base_url=proxy.url)
        try:

            @guard.requires_approval(timeout="30m", redact=("card.number",))
            def issue_refund(payment_id: str, card: dict[str, str]) -> str:
                return "ran"

            out = issue_refund("p_1", {"holder": "A"})  # no number: nothing to hide
        finally:
            guard.close()
            proxy.close()

    assert "ran" == out
    assert ["arguments", "timeout", "tool"] == sorted(json.loads(bodies[0]))


def test_a_provider_that_refuses_redacted_gets_the_create_without_it() -> None:
    """An API 1.2 provider answers 400 unknown field: the guard resends without it, and runs."""

    def as_1_2(method: str, path: str, body: bytes | None) -> tuple[int, dict[str, Any]] | None:
        if method != "POST" or path != "/v1/requests" or body is None:
            return None
        unknown = sorted(set(json.loads(body)) - FIELDS_1_2)
        if not unknown:
            return None
        message = f"unknown field(s): {', '.join(unknown)}"
        return 400, {"error": {"type": "invalid_request", "message": message}}

    ran: list[Any] = []
    with LocalProvider(policy=approve_after(0)) as provider:
        proxy = RewritingProxy(provider.url, refuse=as_1_2)
        guard = make_guard(provider, base_url=proxy.url)
        try:
            out = refund(guard, ran)("p_1", "sk_live_x", {"number": "4242"})
        finally:
            guard.close()
            proxy.close()
        (request,) = provider.requests()

    assert "ran" == out
    assert [("p_1", "sk_live_x", {"number": "4242"})] == ran
    assert 1 == len(proxy.refused)
    assert ["/api_key", "/card/number"] == json.loads(proxy.refused[0] or b"")["redacted"]
    assert () == request.redacted  # the old provider knows nothing of it


def test_a_create_refused_for_another_reason_is_refused_once_more_and_not_run() -> None:
    """A 400 that is not about ``redacted``: one resend without it, then the call does not run."""

    def always(method: str, path: str, body: bytes | None) -> tuple[int, dict[str, Any]] | None:
        if method == "POST" and path == "/v1/requests":
            return 400, {"error": {"type": "invalid_request", "message": "no"}}
        return None

    ran: list[Any] = []
    with LocalProvider() as provider:
        proxy = RewritingProxy(provider.url, refuse=always)
        guard = make_guard(provider, base_url=proxy.url)
        try:
            out = refund(guard, ran)("p_1", "sk_live_x", {"number": "4242"})
        finally:
            guard.close()
            proxy.close()

    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran
    assert 2 == len(proxy.refused)
    assert ["redacted" in json.loads(body or b"") for body in proxy.refused] == [True, False]
