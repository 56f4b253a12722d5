"""A harness retry with the same idempotency key: the 422's original request is adopted only
when it asks for the same call, and a retry with less time left uses the first approval.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

import approval_guard as ag
from approval_guard.testing import LocalProvider
from tests.support.api import REFUND, Api
from tests.support.fakes import FakeProvider, ManualClock, make_tool, unit_guard_for
from tests.support.guards import make_guard, refund_tool

ARGS = {"payment_id": "p", "amount": 1, "currency": "GBP"}


class ReusedKeyProvider(FakeProvider):
    """A fake provider whose 422 for a reused key carries the original request (API 1.1)."""

    def __init__(self, clock: ManualClock, *, original: dict[str, Any] | None) -> None:
        super().__init__(clock)
        self.original = original

    def on_create(self, request: Any) -> Any:
        key = request.headers.get("Idempotency-Key")
        if key == "tc_retry" and self.original is not None and "tc_retry" not in self.keys:
            # The first attempt (another process, more time left) made this request.
            original = dict(self.original)
            self.requests[original["id"]] = original
            self.created_at_mono[original["id"]] = self.clock.monotonic()
            self.keys["tc_retry"] = (original["id"], b"the first attempt's body")
        answer = super().on_create(request)
        if answer[0] == 422 and self.original is not None:
            body = json.loads(answer[2])
            body["request"] = self.requests[self.keys["tc_retry"][0]]
            return 422, answer[1], json.dumps(body)
        return answer


@pytest.fixture
def reused(clock: ManualClock, request: pytest.FixtureRequest) -> Iterator[ReusedKeyProvider]:
    provider = ReusedKeyProvider(clock, original=request.param)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        provider.install(rsps)
        yield provider


def _original(**changes: Any) -> dict[str, Any]:
    out = {
        "id": "req_first",
        "tool": "issue_refund",
        "arguments": dict(ARGS),
        "timeout": "30m",
        "status": "approved",
        "created_at": "2026-09-16T11:59:00Z",
        "deadline_at": "2026-09-16T12:29:00Z",
        "decision": {
            "status": "approved",
            "note": "fine",
            "decided_at": "2026-09-16T11:59:30Z",
            "expires_at": "2026-09-16T12:04:30Z",
        },
    }
    out.update(changes)
    return out


# From the hardening pass, item 5: a harness retry with less time left.
@pytest.mark.parametrize("reused", [_original()], indirect=True)
def test_reused_key_adopts_the_original_request_that_asks_the_same(
    reused: ReusedKeyProvider, clock: ManualClock
) -> None:
    """A 422 carrying the original request with the same tool and arguments is that call."""
    ran: list[Any] = []
    with ag.harness_call(idempotency_key="tc_retry", limit="10m"):
        out = make_tool(unit_guard_for(clock), ran)("p", 1)
    assert {"refunded": 1} == out
    assert [("p", 1, "GBP")] == ran
    assert 1 == len(reused.creates)


# From the hardening pass, item 5: a harness retry with less time left.
@pytest.mark.parametrize(
    ("reused", "words"),
    [
        (_original(arguments={**ARGS, "amount": 99999}), "different tool or different arguments"),
        (_original(tool="delete_account"), "different tool or different arguments"),
        (_original(requested_by="mallory"), "another requested_by"),
        (None, "did not include"),
        (_original(status=17), "did not describe usably"),
    ],
    indirect=["reused"],
)
def test_reused_key_for_another_call_is_not_obtained(
    reused: ReusedKeyProvider, clock: ManualClock, words: str
) -> None:
    """A 422 naming other arguments, another tool, or nothing: NOT_OBTAINED, said honestly."""
    if reused.original is None:
        reused.keys["tc_retry"] = ("req_x", b"another body")
    ran: list[Any] = []
    with ag.harness_call(idempotency_key="tc_retry", limit="10m"):
        out = make_tool(unit_guard_for(clock), ran)("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert words in out.message and "422" in out.message
    assert out.request_id is None
    assert [] == reused.cancels  # another call's request is not ours to withdraw
    assert [] == ran


# From the hardening pass, item 5: a harness retry with less time left.
def test_harness_retry_with_less_time_left_uses_the_first_approval(
    provider: LocalProvider,
) -> None:
    """Same key, less time left (so another timeout): the approval of the first create is used."""
    api = Api(provider.url, provider.credential)
    first = api.new(key="tc_less_time", arguments=REFUND, timeout="30m")
    provider.approve(first["id"], note="fine")
    ran: list[Any] = []
    tool = refund_tool(make_guard(provider), ran)
    with ag.harness_call(idempotency_key="tc_less_time", limit="1m"):
        out = tool("payment_123", 4900)
    assert {"refund_id": "re_1", "amount": 4900} == out
    assert [("payment_123", 4900, "GBP")] == ran
    assert 1 == len(provider.requests())
