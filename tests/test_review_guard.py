"""An adversarial review of the guard side: what it does with provider answers and arguments."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard._serialize import dumps
from approval_guard._wire import format_http_date
from approval_guard.testing import LocalProvider
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
