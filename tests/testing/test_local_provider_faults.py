"""Fault injection: each kind does what it says, in order, as many times as asked."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import time

import pytest
import requests

from approval_guard.testing import LocalProvider
from tests.support.api import Api, error_type


def test_drop_after_commit_on_create_commits_then_hangs_up(
    api: Api, provider: LocalProvider
) -> None:
    """The create is committed but unanswered; the retry with the same key replays it."""
    provider.faults.add("drop_after_commit", on="create")
    with pytest.raises(requests.ConnectionError):
        api.create(key="lost")
    assert 1 == len(provider.requests())
    retry = api.create(key="lost")
    assert 200 == retry.status_code
    assert provider.requests()[0].id == retry.json()["id"]
    assert (2, 1, 1) == (provider.stats.creates, provider.stats.created, provider.stats.replays)


def test_reset_before_processes_nothing(api: Api, provider: LocalProvider) -> None:
    """The connection is cut before anything happens: nothing is created."""
    provider.faults.add("reset_before", on="create")
    with pytest.raises(requests.ConnectionError):
        api.create(key="k")
    assert [] == provider.requests()
    assert 201 == api.create(key="k").status_code


def test_reset_before_on_cancel_leaves_the_request_pending(
    api: Api, provider: LocalProvider
) -> None:
    """A cancel that never arrived changes nothing, but it was counted."""
    created = api.new()
    provider.faults.add("reset_before", on="cancel")
    with pytest.raises(requests.ConnectionError):
        api.cancel(created["id"])
    assert "pending" == provider.get(created["id"]).status
    assert 1 == provider.stats.cancels


@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, "rate_limited"), (500, "internal_error"), (502, "bad_gateway"), (503, "unavailable")],
)
def test_status_fault_answers_that_status_with_retry_after(
    api: Api, provider: LocalProvider, status: int, kind: str
) -> None:
    """A status fault answers the status, an error body and Retry-After; nothing is created."""
    provider.faults.add("status", on="create", status=status, retry_after=2)
    response = api.create()
    assert status == response.status_code
    assert kind == error_type(response)
    assert "2" == response.headers["Retry-After"]
    assert "X-Request-ID" in response.headers
    assert [] == provider.requests()


def test_status_fault_on_poll_counts_no_poll(api: Api, provider: LocalProvider) -> None:
    """A failed poll is not processed: the audit trail counts no poll."""
    created = api.new()
    provider.faults.add("status", on="poll", status=503)
    response = api.poll(created["id"])
    assert 503 == response.status_code
    assert "Retry-After" not in response.headers
    assert 0 == provider.history(created["id"]).poll_count


def test_garbage_on_create_commits_and_answers_non_json(api: Api, provider: LocalProvider) -> None:
    """A garbage answer is 200 with a body that does not parse; the request exists."""
    provider.faults.add("garbage", on="create")
    response = api.create(key="g")
    assert 200 == response.status_code
    with pytest.raises(ValueError):
        response.json()
    assert 1 == len(provider.requests())
    assert provider.requests()[0].id == api.create(key="g").json()["id"]


def test_delay_pushes_a_poll_past_the_read_timeout(api: Api, provider: LocalProvider) -> None:
    """A delayed poll is not answered within the client's read timeout."""
    created = api.new()
    provider.faults.add("delay", on="poll", delay=1.0)
    with pytest.raises(requests.ReadTimeout):
        api.poll(created["id"], timeout=(5, 0.3))
    assert "pending" == api.poll(created["id"]).json()["status"]


def test_delay_then_answers_normally(api: Api, provider: LocalProvider) -> None:
    """A delay fault only delays: the answer is the normal one."""
    created = api.new()
    provider.faults.add("delay", on="poll", delay=0.3)
    started = time.monotonic()
    response = api.poll(created["id"])
    assert time.monotonic() - started >= 0.3
    assert created == response.json()


def test_faults_match_in_order_and_are_consumed(api: Api, provider: LocalProvider) -> None:
    """Faults apply first-in first-out, `times` each, only to their exchange, then stop."""
    created = api.new()
    provider.faults.add("status", on="poll", status=503, times=2)
    provider.faults.add("status", on="poll", status=429, retry_after=1)
    provider.faults.add("status", on="cancel", status=500)
    statuses = [api.poll(created["id"]).status_code for _ in range(4)]
    assert [503, 503, 429, 200] == statuses
    assert 500 == api.cancel(created["id"]).status_code
    assert 200 == api.cancel(created["id"]).status_code
    log = provider.faults.log
    assert ["poll", "poll", "poll", "cancel"] == [record.exchange for record in log]
    assert [503, 503, 429, 500] == [record.status for record in log]
    assert 0 == provider.faults.pending


def test_any_matches_every_exchange(api: Api, provider: LocalProvider) -> None:
    """on='any' hits the next exchange whatever it is."""
    provider.faults.add("status", status=503, times=2)
    assert 503 == api.create().status_code
    assert 503 == api.poll("x").status_code
    assert 201 == api.create().status_code


def test_clear_drops_queued_faults_and_the_log(api: Api, provider: LocalProvider) -> None:
    """clear() empties the queue and the log."""
    provider.faults.add("status", on="create")
    assert 503 == api.create().status_code
    provider.faults.add("status", on="create")
    provider.faults.clear()
    assert 201 == api.create().status_code
    assert [] == provider.faults.log


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "explode"},
        {"kind": "status", "status": 404},
        {"kind": "status", "on": "everything"},
        {"kind": "delay", "delay": -1.0},
        {"kind": "status", "times": 0},
    ],
)
def test_bad_fault_specs_are_refused(provider: LocalProvider, kwargs: dict[str, object]) -> None:
    """Unknown kinds, non-retryable statuses, bad targets or counts raise ValueError."""
    kind = kwargs.pop("kind")
    with pytest.raises(ValueError):
        provider.faults.add(kind, **kwargs)  # type: ignore[arg-type]


def test_stats_count_exchanges(api: Api, reviewer: Api, provider: LocalProvider) -> None:
    """stats counts creates, polls, cancels and decisions received."""
    created = api.new()
    api.poll(created["id"])
    api.poll(created["id"])
    reviewer.decide(created["id"], {"status": "denied", "note": "no"})
    api.cancel(created["id"])
    assert {
        "creates": 1,
        "polls": 2,
        "cancels": 1,
        "decisions": 1,
        "lists": 0,
        "created": 1,
        "replays": 0,
    } == provider.stats.snapshot()


def test_headers_fault_adds_headers_and_replaces_the_date(
    api: Api, provider: LocalProvider
) -> None:
    """A headers fault answers normally, with its Date instead of the provider's, once."""
    created = api.new()
    hostile = "Fri, 31 Dec 9999 23:59:59 -2359"
    provider.faults.add("headers", on="poll", headers={"Date": hostile, "Retry-After": "²"})
    faulted = api.poll(created["id"])
    normal = api.poll(created["id"])
    assert (200, hostile, "²") == (
        faulted.status_code,
        faulted.headers["Date"],
        faulted.headers["Retry-After"],
    )
    assert created["id"] == faulted.json()["id"]
    assert hostile != normal.headers["Date"] and "Retry-After" not in normal.headers


@pytest.mark.parametrize("headers", [None, {}, {"Date": "a\r\nX-Evil: 1"}])
def test_headers_fault_needs_one_line_headers(provider: LocalProvider, headers: object) -> None:
    """A headers fault without headers, or with a header that is not one line, is refused."""
    with pytest.raises(ValueError):
        provider.faults.add("headers", on="poll", headers=headers)  # type: ignore[arg-type]
