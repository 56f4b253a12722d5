"""GET /v1/requests/{id}?wait=...: reads, long polls, wake-ups, deadlines, the cap."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import time

import pytest

from approval_guard._codec.wire_models import parse_request
from approval_guard.testing import LocalProvider
from tests.support.api import Api, error_type, in_thread


def test_read_without_wait_answers_at_once(api: Api) -> None:
    """wait defaults to 0s: a pending request comes back immediately, unchanged."""
    created = api.new()
    started = time.monotonic()
    response = api.poll(created["id"])
    assert time.monotonic() - started < 0.5
    assert 200 == response.status_code
    assert created == response.json()


def test_polling_extends_nothing(api: Api, provider: LocalProvider) -> None:
    """Polls neither create requests nor move the deadline."""
    created = api.new()
    for _ in range(3):
        body = api.poll(created["id"], wait="0s").json()
        assert created["deadline_at"] == body["deadline_at"]
    assert [created["id"]] == [r.id for r in provider.requests()]


def test_terminal_request_answers_at_once_despite_wait(api: Api, provider: LocalProvider) -> None:
    """A decided request is returned immediately even with wait=30s."""
    created = api.new()
    provider.deny(created["id"], "no")
    started = time.monotonic()
    response = api.poll(created["id"], wait="30s")
    assert time.monotonic() - started < 0.5
    body = response.json()
    assert "denied" == body["status"]
    assert {"status": "denied", "note": "no"} == {
        k: body["decision"][k] for k in ("status", "note")
    }
    assert body["decision"].get("expires_at") is None


@pytest.mark.parametrize("decide", ["approve", "deny"])
def test_decision_wakes_a_waiting_poll_at_once(
    api: Api, provider: LocalProvider, decide: str
) -> None:
    """A poll waiting 30s returns within a fraction of a second of the decision."""
    created = api.new()
    thread, out = in_thread(lambda: api.poll(created["id"], wait="30s"))
    assert provider.wait_for_polls(1, timeout=5)
    decided = time.monotonic()
    if decide == "approve":
        provider.approve(created["id"], note="fine")
    else:
        provider.deny(created["id"], "no")
    thread.join(5)
    assert time.monotonic() - decided < 0.5
    request = parse_request(out[0].json())
    assert ("approved" if decide == "approve" else "denied") == request.status
    assert request.decision is not None and request.decision.status == request.status


def test_cancel_wakes_every_waiting_poll(api: Api, provider: LocalProvider) -> None:
    """Three polls on one request all return as soon as it is cancelled."""
    created = api.new()
    waiting = [
        in_thread(lambda: Api(api.url, api.token).poll(created["id"], wait="30s")) for _ in range(3)
    ]
    assert provider.wait_for_polls(3, timeout=5)
    cancelled = time.monotonic()
    assert 200 == api.cancel(created["id"]).status_code
    for thread, _ in waiting:
        thread.join(5)
    assert time.monotonic() - cancelled < 0.5
    assert ["cancelled"] * 3 == [out[0].json()["status"] for _, out in waiting]


def test_deadline_ends_a_waiting_poll_on_time(api: Api) -> None:
    """A 1s request polled with wait=30s comes back expired after about one second."""
    created = api.new(timeout="1s")
    started = time.monotonic()
    response = api.poll(created["id"], wait="30s")
    elapsed = time.monotonic() - started
    assert "expired" == response.json()["status"]
    assert "decision" not in response.json()
    assert 0.7 < elapsed < 2.0


def test_poll_without_decision_returns_pending_when_wait_ends(api: Api) -> None:
    """With nothing happening, wait=1s returns the pending request after about a second."""
    created = api.new()
    started = time.monotonic()
    response = api.poll(created["id"], wait="1s")
    elapsed = time.monotonic() - started
    assert "pending" == response.json()["status"]
    assert 0.9 < elapsed < 2.0


def test_wait_above_the_cap_is_clamped() -> None:
    """With poll_cap=1, wait=60s (and wait=24h) return after about one second."""
    with LocalProvider(poll_cap=1) as local:
        api = Api(local.url, local.credential)
        created = api.new()
        for wait in ("60s", "24h"):
            started = time.monotonic()
            response = api.poll(created["id"], wait=wait)
            assert "pending" == response.json()["status"]
            assert 0.9 < time.monotonic() - started < 2.5


def test_default_cap_is_sixty_seconds() -> None:
    """The local provider caps wait at 60s, as docs/provider-api.md says."""
    with LocalProvider() as local:
        assert 60.0 == local.server.poll_cap


@pytest.mark.parametrize("wait", ["", "30", "30 s", "-1s", "1.5s", "s", "30m1h", "1d"])
def test_malformed_wait_is_400(api: Api, wait: str) -> None:
    """A wait that is not a duration answers 400 invalid_request."""
    created = api.new()
    response = api.poll(created["id"], wait=wait)
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)


def test_unknown_id_is_404(api: Api) -> None:
    """An id that does not exist answers 404 not_found."""
    response = api.poll("7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71", wait="1s")
    assert 404 == response.status_code
    assert "not_found" == error_type(response)


def test_another_credentials_request_is_404(api: Api, provider: LocalProvider) -> None:
    """An instance cannot see another instance's request: 404, as if unknown."""
    created = api.new()
    other = Api(provider.url, provider.store.create_credential("instance", "other"))
    response = other.poll(created["id"])
    assert 404 == response.status_code
    assert "not_found" == error_type(response)


def test_reviewer_can_read_any_request(api: Api, reviewer: Api) -> None:
    """The review side may read a request by id."""
    created = api.new()
    assert created == reviewer.poll(created["id"]).json()


def test_poll_requires_a_credential(api: Api, provider: LocalProvider) -> None:
    """A read without a bearer answers 401."""
    created = api.new()
    response = Api(provider.url, None).poll(created["id"])
    assert 401 == response.status_code
    assert "unauthorized" == error_type(response)


def test_polls_are_counted_in_the_history(api: Api, provider: LocalProvider) -> None:
    """The audit trail counts the instance's polls."""
    created = api.new()
    for _ in range(3):
        api.poll(created["id"])
    assert 3 == provider.history(created["id"]).poll_count


def test_approval_carries_expires_at(api: Api, provider: LocalProvider) -> None:
    """An approval read by a poll has expires_at = decided_at + valid_for."""
    created = api.new()
    provider.approve(created["id"], valid_for="2m")
    decision = parse_request(api.poll(created["id"]).json()).decision
    assert decision is not None and decision.expires_at is not None
    assert 120 == (decision.expires_at - decision.decided_at).total_seconds()
