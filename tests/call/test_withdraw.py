"""Giving up withdraws the request: a lost create is found and cancelled, a poll refused for
good still cancels, and a cancel's answer counts only when it shows the request cancelled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard, refund_tool
from tests.support.hostile import HostileProvider, hostile_guard, short_refund


def test_lost_create_answers_are_recovered_and_withdrawn(
    provider: LocalProvider,
) -> None:
    """A create answer lost, then no answer in time: the request made is found and cancelled."""
    provider.faults.add("drop_after_commit", on="create")
    provider.faults.add("status", on="create", status=503, retry_after=30)
    guard = make_guard(provider, harness_limit="4s")
    out = refund_tool(guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    [request] = provider.requests()
    assert "cancelled" == request.status
    assert request.id == out.request_id


def _abandon_when_created(p: HostileProvider) -> threading.Event:
    abandon = threading.Event()

    def watch() -> None:
        p.created.wait(5)
        abandon.set()

    threading.Thread(target=watch, daemon=True).start()
    return abandon


# Found in the adversarial review of the guard side (what it does with answers).
@pytest.mark.parametrize(
    "answer",
    [
        lambda r: {**r, "status": "approved"},
        lambda r: {**r, "status": "pending"},
        lambda r: {**r, "id": "another", "status": "cancelled"},
        lambda r: {"ok": True},
    ],
)
def test_a_cancel_answered_200_without_a_cancelled_request_is_not_reported_cancelled(
    hostile: Callable[..., HostileProvider], answer: Callable[[dict[str, Any]], Any]
) -> None:
    """A 200 to the cancel whose body does not show this request cancelled: never "cancelled"."""
    p = hostile(cancel=lambda r, _: (200, answer(r)))
    ran: list[Any] = []
    with ag.harness_call(abandon=_abandon_when_created(p)):
        out = short_refund(hostile_guard(p), ran)("p", 1)
    assert [] == ran and "cancel" in p.seen
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert "was cancelled" not in out.message and "cancelled" != out.status, out


# Found in the adversarial review of the guard side (what it does with answers).
@pytest.mark.parametrize("status", [400, 401, 403, 404, 418])
def test_a_poll_refused_for_good_still_withdraws_the_request(
    hostile: Callable[..., HostileProvider], status: int
) -> None:
    """A poll answered with a non-retryable error: nobody waits any more, so the cancel is sent."""
    p = hostile(read=lambda r, _: (status, {"error": {"type": "nope", "message": "no"}}))
    ran: list[Any] = []
    out = short_refund(hostile_guard(p), ran)("p", 1)
    assert [] == ran and ["create", "read", "cancel"] == p.seen
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert out.message.endswith("; the pending request was cancelled."), out.message
