"""Cancel, the reviewer endpoints (list, decision, history, events) and routing errors."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from approval_guard._codec.wire import parse_timestamp
from approval_guard._codec.wire_models import parse_request
from approval_guard.provider.http.waits import Notifier
from approval_guard.testing import LocalProvider
from tests.support.api import Api, error_type, in_thread
from tests.support.raw_http import listed

# --------------------------------------------------------------------------- cancel


@pytest.mark.parametrize("body", [None, {}, {"reason": "the harness gave up"}])
def test_cancel_pending_request(api: Api, body: Any) -> None:
    """Cancelling a pending request answers 200 with status cancelled and cancelled_at."""
    created = api.new()
    response = api.cancel(created["id"], body)
    assert 200 == response.status_code
    request = parse_request(response.json())
    assert "cancelled" == request.status
    assert request.cancelled_at is not None
    assert request.decision is None


def test_cancel_twice_is_200_unchanged(api: Api) -> None:
    """A second cancel answers 200 with the same cancelled request."""
    created = api.new()
    first = api.cancel(created["id"]).json()
    second = api.cancel(created["id"])
    assert 200 == second.status_code
    assert first == second.json()


@pytest.mark.parametrize("outcome", ["approved", "denied", "expired"])
def test_cancel_after_an_outcome_is_409_with_the_request(
    api: Api, provider: LocalProvider, outcome: str
) -> None:
    """Cancelling an approved, denied or expired request answers 409 not_pending + request."""
    created = api.new(timeout="1s" if outcome == "expired" else "30m")
    if outcome == "approved":
        provider.approve(created["id"])
    elif outcome == "denied":
        provider.deny(created["id"], "no")
    else:
        api.poll(created["id"], wait="5s")  # returns once the deadline passed
    response = api.cancel(created["id"])
    assert 409 == response.status_code
    assert "not_pending" == error_type_of_409(response.json())
    assert outcome == parse_request(response.json()["request"]).status
    assert outcome == provider.get(created["id"]).status


def error_type_of_409(body: dict[str, Any]) -> str:
    assert set(body) == {"error", "request"}
    result: str = body["error"]["type"]
    return result


def test_cancel_unknown_is_404(api: Api) -> None:
    """Cancelling an unknown id answers 404 not_found."""
    response = api.cancel("no-such-request")
    assert 404 == response.status_code
    assert "not_found" == error_type(response)


def test_cancel_another_credentials_request_is_404(api: Api, provider: LocalProvider) -> None:
    """An instance cannot cancel another instance's request."""
    created = api.new()
    other = Api(provider.url, provider.store.create_credential("instance", "other"))
    assert 404 == other.cancel(created["id"]).status_code
    assert "pending" == provider.get(created["id"]).status


@pytest.mark.parametrize(
    "body", [{"reason": 5}, {"why": "x"}, [1]], ids=["type", "unknown", "list"]
)
def test_cancel_with_a_bad_body_is_400_and_changes_nothing(
    api: Api, provider: LocalProvider, body: Any
) -> None:
    """A cancel body other than {} or {"reason": str} answers 400."""
    created = api.new()
    response = api.cancel(created["id"], body)
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)
    assert "pending" == provider.get(created["id"]).status


def test_cancel_is_recorded_in_the_history(api: Api, provider: LocalProvider) -> None:
    """The audit trail shows who cancelled, and why."""
    created = api.new()
    api.cancel(created["id"], {"reason": "abandoned"})
    events = provider.history(created["id"]).events
    assert ["created", "cancelled"] == [e.type for e in events]
    assert "abandoned" == events[1].detail["reason"]
    assert events[1].actor is not None and "instance" == events[1].actor.kind


# --------------------------------------------------------------------------- list


def test_list_is_newest_first_and_filters_by_status(
    api: Api, reviewer: Api, provider: LocalProvider
) -> None:
    """GET /v1/requests lists newest first; ?status=pending filters."""
    ids = [api.new(tool=f"tool_{i}")["id"] for i in range(3)]
    provider.approve(ids[1])
    everything = reviewer.get("/v1/requests").json()["requests"]
    assert list(reversed(ids)) == [r["id"] for r in everything]
    pending = reviewer.get("/v1/requests", params={"status": "pending"}).json()["requests"]
    assert [ids[2], ids[0]] == [r["id"] for r in pending]
    for item in everything:
        parse_request(item)


def test_list_marks_overdue_requests_expired(
    api: Api, reviewer: Api, provider: LocalProvider
) -> None:
    """A request past its deadline is listed as expired, never as pending."""
    created = api.new(timeout="1s")
    provider.clock_offset += timedelta(seconds=1.1)  # the provider's time moves on
    pending = reviewer.get("/v1/requests", params={"status": "pending"}).json()["requests"]
    assert [] == pending
    everything = reviewer.get("/v1/requests").json()["requests"]
    assert [("expired", created["id"])] == [(r["status"], r["id"]) for r in everything]


def test_list_with_a_bad_status_is_400(reviewer: Api) -> None:
    """?status=bogus answers 400."""
    response = reviewer.get("/v1/requests", params={"status": "bogus"})
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)


@pytest.mark.parametrize(
    "path", ["/v1/requests", "/v1/requests?status=pending", "/v1/events", "/v1/requests/x/history"]
)
def test_instance_credential_cannot_use_reviewer_reads(api: Api, path: str) -> None:
    """Listing, history and the change feed need a reviewer credential: 403."""
    response = api.get(path)
    assert 403 == response.status_code
    assert "forbidden" == error_type(response)


# --------------------------------------------------------------------------- decision


def test_approval_sets_expires_at_from_valid_for(api: Api, reviewer: Api) -> None:
    """An approval with valid_for=10m has expires_at = decided_at + 10m."""
    created = api.new()
    response = reviewer.decide(
        created["id"], {"status": "approved", "note": "ok", "valid_for": "10m"}
    )
    assert 200 == response.status_code
    request = parse_request(response.json())
    assert "approved" == request.status
    assert request.decision is not None and request.decision.expires_at is not None
    assert "ok" == request.decision.note
    assert 600 == (request.decision.expires_at - request.decision.decided_at).total_seconds()


def test_valid_for_defaults_to_five_minutes(api: Api, reviewer: Api) -> None:
    """Without valid_for an approval lasts 5m."""
    created = api.new()
    decision = reviewer.decide(created["id"], {"status": "approved"}).json()["decision"]
    decided = parse_timestamp(decision["decided_at"], field="decided_at")
    expires = parse_timestamp(decision["expires_at"], field="expires_at")
    assert 300 == (expires - decided).total_seconds()
    assert decision["note"] is None


def test_denial_has_no_expires_at(api: Api, reviewer: Api) -> None:
    """A denial ignores valid_for and carries no expires_at."""
    created = api.new()
    body = reviewer.decide(
        created["id"], {"status": "denied", "note": "not this one", "valid_for": "1h"}
    ).json()
    assert "denied" == body["status"] == body["decision"]["status"]
    assert body["decision"].get("expires_at") is None
    assert "not this one" == body["decision"]["note"]


@pytest.mark.parametrize("first", ["approved", "denied", "cancelled", "expired"])
def test_decision_on_a_non_pending_request_is_409(
    api: Api, reviewer: Api, provider: LocalProvider, first: str
) -> None:
    """Deciding a request that is no longer pending answers 409 not_pending; nothing changes."""
    created = api.new(timeout="1s" if first == "expired" else "30m")
    if first == "approved":
        provider.approve(created["id"])
    elif first == "denied":
        provider.deny(created["id"], "no")
    elif first == "cancelled":
        api.cancel(created["id"])
    else:
        api.poll(created["id"], wait="5s")
    response = reviewer.decide(created["id"], {"status": "denied", "note": "late"})
    assert 409 == response.status_code
    assert "not_pending" == error_type_of_409(response.json())
    assert first == provider.get(created["id"]).status


def test_instance_credential_can_never_decide(api: Api, provider: LocalProvider) -> None:
    """An instance credential deciding (even its own request) gets 403 forbidden."""
    created = api.new()
    response = api.decide(created["id"], {"status": "approved"})
    assert 403 == response.status_code
    assert "forbidden" == error_type(response)
    assert "pending" == provider.get(created["id"]).status


def test_decision_on_unknown_request_is_404(reviewer: Api) -> None:
    """Deciding an unknown id answers 404."""
    response = reviewer.decide("nope", {"status": "approved"})
    assert 404 == response.status_code
    assert "not_found" == error_type(response)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"status": "maybe"},
        {"status": "pending"},
        {"status": "approved", "note": 5},
        {"status": "approved", "valid_for": "0s"},
        {"status": "approved", "valid_for": "5 minutes"},
        {"status": "approved", "valid_for": 300},
        {"status": "approved", "extra": True},
        ["approved"],
    ],
)
def test_bad_decision_body_is_400_and_changes_nothing(
    api: Api, reviewer: Api, provider: LocalProvider, body: Any
) -> None:
    """A malformed decision answers 400 invalid_request and the request stays pending."""
    created = api.new()
    response = reviewer.decide(created["id"], body)
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)
    assert "pending" == provider.get(created["id"]).status


def test_decision_is_audited_with_the_reviewer_not_the_secret(
    api: Api, reviewer: Api, provider: LocalProvider
) -> None:
    """History shows created/decided/polls; the decider's name and id, never a token."""
    created = api.new()
    api.poll(created["id"])
    reviewer.decide(created["id"], {"status": "approved", "note": "ok"})
    response = reviewer.get(f"/v1/requests/{created['id']}/history")
    assert 200 == response.status_code
    history = response.json()
    assert ["created", "decided"] == [e["type"] for e in history["events"]]
    assert 1 == history["poll_count"]
    assert "testing reviewer" == history["events"][1]["actor"]["name"]
    assert "reviewer" == history["events"][1]["actor"]["kind"]
    assert "approved" == history["request"]["status"]
    assert provider.reviewer_credential not in response.text
    assert provider.credential not in response.text


def test_expiry_is_audited(api: Api, provider: LocalProvider) -> None:
    """An expired request's history ends with an 'expired' event dated at its deadline."""
    created = api.new(timeout="1s")
    api.poll(created["id"], wait="5s")
    events = provider.history(created["id"]).events
    assert ["created", "expired"] == [e.type for e in events]
    assert parse_timestamp(created["deadline_at"], field="deadline_at") == events[-1].at
    assert events[-1].actor is None


def test_history_of_unknown_request_is_404(reviewer: Api) -> None:
    """History of an unknown id answers 404."""
    assert 404 == reviewer.get("/v1/requests/nope/history").status_code


# --------------------------------------------------------------------------- change feed


def test_events_answers_as_soon_as_something_changes(
    api: Api, reviewer: Api, provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/v1/events?after=N waits, then answers {seq} right after a create."""
    seq = reviewer.get("/v1/events").json()["seq"]
    watching = threading.Event()
    watch_any = Notifier.watch_any

    @contextlib.contextmanager
    def noted(self: Notifier) -> Iterator[asyncio.Event]:
        with watch_any(self) as event:
            watching.set()
            yield event

    monkeypatch.setattr(Notifier, "watch_any", noted)
    thread, out = in_thread(
        lambda: reviewer.get("/v1/events", params={"after": seq, "wait": "20s"})
    )
    assert watching.wait(5)  # the request waits for a change
    started = time.monotonic()
    api.new()
    thread.join(5)
    assert time.monotonic() - started < 0.5
    assert out[0].json()["seq"] > seq


def test_events_returns_at_once_when_already_behind(api: Api, reviewer: Api) -> None:
    """after=0 with changes already made answers immediately."""
    api.new()
    started = time.monotonic()
    assert reviewer.get("/v1/events", params={"after": 0, "wait": "20s"}).json()["seq"] >= 1
    assert time.monotonic() - started < 0.5


def test_events_wait_ends_with_the_same_seq(reviewer: Api) -> None:
    """With no change, the feed answers the same seq when the wait ends."""
    seq = reviewer.get("/v1/events").json()["seq"]
    assert seq == reviewer.get("/v1/events", params={"after": seq, "wait": "1s"}).json()["seq"]


def test_events_with_bad_after_is_400(reviewer: Api) -> None:
    """after must be an integer."""
    assert 400 == reviewer.get("/v1/events", params={"after": "x"}).status_code


# --------------------------------------------------------------------------- routing


def test_unknown_path_is_404(api: Api) -> None:
    """An unknown endpoint answers 404 not_found in the error shape."""
    response = api.get("/v2/whatever")
    assert 404 == response.status_code
    assert "not_found" == error_type(response)


def test_wrong_method_is_405_with_allow(api: Api) -> None:
    """DELETE on a request answers 405 with an Allow header and the error shape."""
    response = api.session.delete(f"{api.url}/v1/requests/x", headers=api.headers(), timeout=5)
    assert 405 == response.status_code
    assert "GET" == response.headers["Allow"]
    assert "invalid_request" == error_type(response)


def test_the_list_pages_through_every_request(provider: LocalProvider, api: Api) -> None:
    """limit and before walk the whole list, newest first, with next_before null at the end."""
    ids = [api.new()["id"] for _ in range(5)][::-1]
    seen: list[str] = []
    query = "?limit=2"
    while True:
        page = listed(provider, query)
        seen += [r["id"] for r in page["requests"]]
        if page["next_before"] is None:
            break
        assert page["requests"][-1]["id"] == page["next_before"]
        query = f"?limit=2&before={page['next_before']}"
    assert ids == seen


def test_the_list_filters_by_several_statuses(provider: LocalProvider, api: Api) -> None:
    """status=approved,cancelled lists exactly the requests with one of those statuses."""
    approved, cancelled, pending = (api.new()["id"] for _ in range(3))
    provider.approve(approved)
    assert 200 == api.cancel(cancelled).status_code

    page = listed(provider, "?status=approved,cancelled")

    assert [cancelled, approved] == [r["id"] for r in page["requests"]]
    assert pending not in {r["id"] for r in listed(provider, "?status=approved")["requests"]}


def test_the_list_display_escapes_hidden_characters(provider: LocalProvider, api: Api) -> None:
    """The list's display form shows bidi and invisible characters escaped, values intact."""
    created = api.new(tool="pay\u202eusd", arguments={"to\u200b": "a\u2066b\x1b[2J"})
    provider.deny(created["id"], "no\u061c")

    [entry] = listed(provider)["requests"]

    assert {
        "tool": "pay\\u202eusd",
        "arguments": '{\n  "to\\u200b": "a\\u2066b\\u001b[2J"\n}',
        "note": "no\\u061c",
        "decided_by": "testing reviewer",
        "cancel_reason": None,
    } == entry["display"]
    assert {"to\u200b": "a\u2066b\x1b[2J"} == entry["arguments"]
