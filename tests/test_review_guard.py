"""An adversarial review of the guard side: what it does with provider answers and arguments."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard._serialize import dumps
from approval_guard._wire import format_http_date
from approval_guard.testing import LocalProvider, approve_after
from tests.test_integration import make_guard, refund_tool

ARGS = {"payment_id": "p", "amount": 1, "currency": "GBP"}


def _create_raw(p: LocalProvider, key: str, arguments: dict[str, Any], timeout: str) -> str:
    """Create a request as an earlier attempt of the call would have (same key, same bytes)."""
    body = dumps({"tool": "issue_refund", "arguments": arguments, "timeout": timeout})
    answer = requests.post(
        p.url + "/v1/requests",
        data=body,
        headers={
            "Authorization": f"Bearer {p.credential}",
            "Idempotency-Key": key,
            "Content-Type": "application/json",
        },
        timeout=5,
    )
    assert answer.status_code == 201, answer.text
    request_id: str = answer.json()["id"]
    return request_id


@pytest.mark.parametrize(
    ("lagging", "expected"),
    [("create", ag.Reason.APPROVAL_EXPIRED), ("any", ag.Reason.NOT_OBTAINED)],
)
def test_a_date_behind_an_old_decision_does_not_keep_an_expired_approval_alive(
    approval_provider: LocalProvider, lagging: str, expected: ag.Reason
) -> None:
    """An approval that expired a minute ago, read through a Date lagging behind it: no run."""
    p = approval_provider
    p.clock_offset = timedelta(seconds=-120)
    request_id = _create_raw(p, "tc_old", ARGS, "1m")
    p.approve(request_id, valid_for="1m")  # decided 2 min ago, expired 1 min ago
    p.clock_offset = timedelta(0)
    stale = datetime.now(timezone.utc) - timedelta(minutes=5)  # a cache's Date
    p.faults.add("headers", on=lagging, times=10, headers={"Date": format_http_date(stale)})
    ran: list[Any] = []
    with ag.harness_call(idempotency_key="tc_old"):
        out = refund_tool(make_guard(p), ran, timeout="1m")("p", 1)
    assert [] == ran
    assert isinstance(out, ag.NotRun) and expected == out.reason, out.message


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
    approval_provider: LocalProvider, value: Any, shown: Any
) -> None:
    """A str/int/float/Decimal subclass is sent as the value the tool gets, not its conversions'."""
    p = approval_provider
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
