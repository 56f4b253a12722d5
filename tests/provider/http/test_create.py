"""POST /v1/requests: creation, idempotency, validation, authentication, headers."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import json
import string
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approval_guard._codec.duration import format_duration, parse_duration_string
from approval_guard._codec.wire import format_http_date, parse_http_date, parse_timestamp
from approval_guard._codec.wire_models import parse_request
from approval_guard.testing import LocalProvider
from tests.support.api import REFUND, Api, error_type, eventually, in_thread


@pytest.fixture(scope="module")
def shared() -> Iterator[LocalProvider]:
    """One provider for the property tests (hypothesis dislikes function fixtures)."""
    with LocalProvider() as local:
        yield local


def test_new_key_creates_a_pending_request(api: Api) -> None:
    """A new key answers 201 with a pending request whose deadline is created_at + timeout."""
    response = api.create(timeout="30m")
    assert 201 == response.status_code
    assert "application/json" == response.headers["Content-Type"]
    body = response.json()
    request = parse_request(body)
    assert "pending" == request.status
    assert "issue_refund" == request.tool
    assert REFUND == request.arguments
    assert "30m" == request.timeout
    assert timedelta(minutes=30) == request.deadline_at - request.created_at
    assert "decision" not in body
    assert uuid.UUID(request.id).version == 4


def test_timeout_is_written_in_canonical_form(api: Api) -> None:
    """A timeout of '90s' comes back as '1m30s'."""
    assert "1m30s" == api.new(timeout="90s")["timeout"]


def test_same_key_same_body_replays_the_current_state(api: Api, provider: LocalProvider) -> None:
    """A retried create answers 200 with the request as it is now (decided, here)."""
    first = api.new(key="key-1")
    provider.approve(first["id"], note="ok")
    replay = api.create(key="key-1")
    assert 200 == replay.status_code
    assert first["id"] == replay.json()["id"]
    assert "approved" == replay.json()["status"]
    assert 1 == len(provider.requests())


def test_same_key_equivalent_timeout_spelling_is_the_same_body(api: Api) -> None:
    """'90s' and '1m30s' are the same body for idempotency."""
    first = api.new(key="k", timeout="90s")
    assert first["id"] == api.create(key="k", timeout="1m30s").json()["id"]


@pytest.mark.parametrize(
    "change",
    [{"tool": "other"}, {"arguments": {"amount": 1}}, {"timeout": "31m"}],
    ids=["tool", "arguments", "timeout"],
)
def test_same_key_different_body_is_422_and_creates_nothing(
    api: Api, provider: LocalProvider, change: dict[str, Any]
) -> None:
    """Reusing a key for another body answers 422 idempotency_key_reused."""
    api.new(key="key-2")
    response = api.create(key="key-2", **change)
    assert 422 == response.status_code
    assert "idempotency_key_reused" == error_type(response)
    assert 1 == len(provider.requests())


def test_keys_belong_to_their_credential(api: Api, provider: LocalProvider) -> None:
    """Another instance credential using the same key gets its own request."""
    other = Api(provider.url, provider.store.create_credential("instance", "other"))
    first = api.new(key="shared-key")
    second = other.new(key="shared-key", tool="something_else")
    assert first["id"] != second["id"]


def test_key_in_use_while_the_first_request_is_processed_is_409(
    api: Api, provider: LocalProvider
) -> None:
    """A duplicate arriving while the first is still being processed gets 409, then replays."""
    provider.faults.add("delay", on="create", delay=0.8)
    thread, out = in_thread(lambda: api.create(key="busy"))
    # The first create holds the key while its injected delay runs (the proxy has
    # passed its head on, the body not yet): the store shows the key in flight.
    assert eventually(lambda: any("busy" == key for _, key in provider.store._in_flight))
    second = Api(provider.url, provider.credential).create(key="busy")
    thread.join(5)
    assert 409 == second.status_code
    assert "idempotency_key_in_use" == error_type(second)
    assert 201 == out[0].status_code
    retry = api.create(key="busy")
    assert 200 == retry.status_code
    assert out[0].json()["id"] == retry.json()["id"]


@pytest.mark.parametrize(
    "key",
    [None, "", "x" * 256, "caf\u00e9", "tab\there"],
    ids=["missing", "empty", "too-long", "non-ascii", "control-char"],
)
def test_bad_idempotency_key_is_400(api: Api, provider: LocalProvider, key: str | None) -> None:
    """A missing, empty, over-long or non-printable Idempotency-Key answers 400."""
    headers = api.headers()
    if key is not None:
        headers["Idempotency-Key"] = key
    body = json.dumps({"tool": "t", "arguments": {}, "timeout": "1m"}).encode()
    response = api.session.post(
        f"{api.url}/v1/requests",
        data=body,
        headers={**headers, "Content-Type": "application/json"},
        timeout=10,
    )
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)
    assert [] == provider.requests()


@pytest.mark.parametrize(
    "body",
    [
        {"tool": "t", "arguments": {}},
        {"tool": "t", "timeout": "1m"},
        {"arguments": {}, "timeout": "1m"},
        {"tool": "", "arguments": {}, "timeout": "1m"},
        {"tool": "x" * 201, "arguments": {}, "timeout": "1m"},
        {"tool": 5, "arguments": {}, "timeout": "1m"},
        {"tool": "t", "arguments": [], "timeout": "1m"},
        {"tool": "t", "arguments": "x", "timeout": "1m"},
        {"tool": "t", "arguments": {}, "timeout": 60},
        {"tool": "t", "arguments": {}, "timeout": "0s"},
        {"tool": "t", "arguments": {}, "timeout": "24h1s"},
        {"tool": "t", "arguments": {}, "timeout": "30 minutes"},
        {"tool": "t", "arguments": {}, "timeout": "30m1h"},
        {"tool": "t", "arguments": {}, "timeout": "1m", "extra": 1},
        ["tool", "arguments", "timeout"],
        "just a string",
    ],
    ids=[
        "no-timeout",
        "no-arguments",
        "no-tool",
        "empty-tool",
        "long-tool",
        "tool-int",
        "arguments-list",
        "arguments-str",
        "timeout-int",
        "timeout-zero",
        "timeout-over-24h",
        "timeout-prose",
        "timeout-order",
        "unknown-field",
        "array-body",
        "string-body",
    ],
)
def test_malformed_body_is_400_and_creates_nothing(
    api: Api, provider: LocalProvider, body: Any
) -> None:
    """Wrong types, missing or unknown fields and bad durations answer 400 invalid_request."""
    response = api.create(body=body)
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)
    assert [] == provider.requests()


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"", b"\xff\xfe", b'{"tool": "t", "arguments": {"x": NaN}, "timeout": "1m"}'],
    ids=["broken", "empty", "not-utf8", "nan"],
)
def test_malformed_json_is_400(api: Api, provider: LocalProvider, raw: bytes) -> None:
    """A body that is not valid JSON answers 400 invalid_request."""
    response = api.post_raw("/v1/requests", raw, **{"Idempotency-Key": "k"})
    assert 400 == response.status_code
    assert "invalid_request" == error_type(response)
    assert [] == provider.requests()


def test_oversized_body_is_413(api: Api, provider: LocalProvider) -> None:
    """A body over 64 KiB answers 413 invalid_request and creates nothing."""
    response = api.create(arguments={"blob": "x" * 70_000})
    assert 413 == response.status_code
    assert "invalid_request" == error_type(response)
    assert [] == provider.requests()
    # The connection was closed; the session reconnects and the server still serves.
    assert 201 == api.create().status_code


def test_body_just_under_the_limit_is_accepted(api: Api) -> None:
    """A 60 KiB body is fine."""
    assert 201 == api.create(arguments={"blob": "x" * 60_000}).status_code


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer wrong", "Basic abc", "agi_not_a_real_token"],
    ids=["missing", "empty-bearer", "unknown-token", "basic", "no-scheme"],
)
def test_missing_or_bad_credential_is_401(
    provider: LocalProvider, authorization: str | None
) -> None:
    """No bearer, or an unknown one, answers 401 unauthorized."""
    api = Api(provider.url, None)
    headers = {"Idempotency-Key": "k"}
    if authorization is not None:
        headers["Authorization"] = authorization
    response = api.session.post(
        f"{provider.url}/v1/requests",
        json={"tool": "t", "arguments": {}, "timeout": "1m"},
        headers=headers,
        timeout=10,
    )
    assert 401 == response.status_code
    assert "unauthorized" == error_type(response)
    assert [] == provider.requests()


def test_revoked_credential_is_401(api: Api, provider: LocalProvider) -> None:
    """A revoked instance credential can no longer create."""
    cred = provider.store.authenticate(provider.credential)
    assert cred is not None
    provider.store.revoke_credential(cred.id)
    assert 401 == api.create().status_code


def test_reviewer_credential_cannot_create(reviewer: Api) -> None:
    """Requests are created by instances; a reviewer credential gets 403."""
    response = reviewer.create()
    assert 403 == response.status_code
    assert "forbidden" == error_type(response)


def test_every_response_has_a_fresh_request_id_and_a_date(api: Api) -> None:
    """X-Request-ID is a fresh uuid on every answer (errors too); Date is the provider's clock."""
    responses = [api.create(), api.create(body={}), api.poll("nope"), api.get("/nowhere")]
    ids = [r.headers["X-Request-ID"] for r in responses]
    assert len(set(ids)) == len(ids)
    for value in ids:
        uuid.UUID(value)
    for response in responses:
        date = parse_http_date(response.headers["Date"])
        assert date is not None
        created = parse_timestamp(responses[0].json()["created_at"], field="created_at")
        assert abs((date - created).total_seconds()) < 5


def test_date_header_follows_the_provider_clock() -> None:
    """With the provider clock 10 minutes ahead, Date and created_at are 10 minutes ahead."""
    with LocalProvider(clock_offset=timedelta(minutes=10)) as local:
        response = Api(local.url, local.credential).create()
        created = parse_timestamp(response.json()["created_at"], field="created_at")
        date = parse_http_date(response.headers["Date"])
        assert date is not None
        assert abs((date - created).total_seconds()) < 2
        ahead = (created - datetime.now(timezone.utc)).total_seconds()
        assert 590 < ahead < 610
        assert format_http_date(date) == response.headers["Date"]


_DURATION = st.builds(
    lambda h, m, s: (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else ""),
    st.integers(0, 30),
    st.integers(0, 90),
    st.integers(0, 90),
).filter(bool)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(timeout=_DURATION)
def test_any_duration_in_range_is_accepted_in_canonical_form(
    shared: LocalProvider, timeout: str
) -> None:
    """Durations from 1s to 24h are accepted and written canonically; others are 400."""
    seconds = parse_duration_string(timeout)
    response = Api(shared.url, shared.credential).create(timeout=timeout)
    if 1 <= seconds <= 24 * 3600:
        assert 201 == response.status_code
        assert format_duration(seconds) == response.json()["timeout"]
    else:
        assert 400 == response.status_code


_KEY = st.text(
    alphabet=string.ascii_letters + string.digits + string.punctuation, min_size=1, max_size=255
)


@settings(max_examples=60, deadline=None)
@given(key=_KEY, data=st.data())
def test_any_printable_key_is_idempotent(shared: LocalProvider, key: str, data: Any) -> None:
    """Any printable-ASCII key: the same body replays (200), another body is 422."""
    # Each example gets its own credential, so keys from earlier examples do not collide.
    api = Api(shared.url, shared.store.create_credential("instance", "hypothesis"))
    arguments = data.draw(st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
    first = api.create(key=key, arguments=arguments)
    assert 201 == first.status_code
    again = api.create(key=key, arguments=arguments)
    assert (200, first.json()["id"]) == (again.status_code, again.json()["id"])
    other = api.create(key=key, arguments={**arguments, "extra": 1})
    assert 422 == other.status_code


def test_reused_key_answer_carries_the_first_request(provider: LocalProvider, api: Api) -> None:
    """422 idempotency_key_reused carries the request first made with the key, as it is now."""
    first = api.new(key="shared", timeout="30m")
    provider.approve(first["id"], note="ok")

    response = api.create(key="shared", timeout="29m")

    assert (422, "idempotency_key_reused") == (response.status_code, error_type(response))
    original = response.json()["request"]
    assert (first["id"], "approved", "30m") == (
        original["id"],
        original["status"],
        original["timeout"],
    )
    assert first["arguments"] == original["arguments"]


def test_another_credential_never_sees_a_request_through_a_key(provider: LocalProvider) -> None:
    """Keys belong to one credential: another one with the same key gets its own request."""
    first = Api(provider.url, provider.credential).new(key="shared")
    other = Api(provider.url, provider.store.create_credential("instance", "other"))

    response = other.create(key="shared", timeout="29m")

    assert 201 == response.status_code
    assert first["id"] != response.json()["id"]
