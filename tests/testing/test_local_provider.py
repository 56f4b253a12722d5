"""approval_guard.testing.LocalProvider and the pytest plugin's fixtures."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import approval_guard.testing as ag_testing
from approval_guard.provider import NotPendingError
from approval_guard.testing import LocalProvider, deny_after
from tests.support.api import Api, in_thread

pytest_plugins = ["pytester"]


def test_names_are_fixed() -> None:
    """url, credential and reviewer_credential are there, on 127.0.0.1."""
    with LocalProvider() as provider:
        assert provider.url.startswith("http://127.0.0.1:")
        assert provider.credential.startswith("agi_")
        assert provider.reviewer_credential.startswith("agr_")
        assert provider.credential not in repr(provider)


def test_next_request_blocks_until_a_new_request_appears(
    provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """next_request waits for a request it has not returned before, oldest first."""
    api = Api(provider.url, provider.credential)
    store = provider.store
    waiting = threading.Event()
    wait_for_change = store.wait_for_change

    def noted(**kwargs: Any) -> int:
        waiting.set()
        return wait_for_change(**kwargs)

    monkeypatch.setattr(store, "wait_for_change", noted)
    thread, out = in_thread(lambda: provider.next_request(timeout=5))
    assert waiting.wait(5)  # it found nothing pending and waits for a change
    first = api.new(tool="first")
    second = api.new(tool="second")
    thread.join(5)
    assert first["id"] == out[0].id
    assert second["id"] == provider.next_request(timeout=1).id
    with pytest.raises(TimeoutError):
        provider.next_request(timeout=0.2)


def test_approve_after_policy_decides_in_the_background() -> None:
    """policy=approve_after(0.1) approves every new request about 0.1 s later."""
    with LocalProvider(policy=ag_testing.approve_after(0.1, note="auto")) as provider:
        api = Api(provider.url, provider.credential)
        created = api.new()
        started = time.monotonic()
        body = api.poll(created["id"], wait="10s").json()
        assert "approved" == body["status"]
        assert "auto" == body["decision"]["note"]
        assert 0.05 < time.monotonic() - started < 2.0


def test_deny_after_policy() -> None:
    """policy=deny_after(0) denies every new request with its note."""
    with LocalProvider(policy=ag_testing.deny_after(0, note="never")) as provider:
        api = Api(provider.url, provider.credential)
        created = api.new()
        body = api.poll(created["id"], wait="10s").json()
        assert ("denied", "never") == (body["status"], body["decision"]["note"])


def test_callable_policy_sees_each_request_once() -> None:
    """A plain callable policy is called once per new request."""
    seen: list[str] = []

    def policy(provider: LocalProvider, request: Any) -> None:
        seen.append(request.tool)
        provider.deny(request.id, f"no {request.tool}")

    with LocalProvider(policy=policy) as provider:
        api = Api(provider.url, provider.credential)
        for tool in ("a", "b"):
            created = api.new(tool=tool)
            assert f"no {tool}" == api.poll(created["id"], wait="10s").json()["decision"]["note"]
    assert ["a", "b"] == seen


@pytest.mark.parametrize(
    "valid_for", ["0s", timedelta(minutes=-1), -30.0], ids=["zero", "timedelta", "seconds"]
)
def test_approve_can_make_an_already_expired_approval(
    provider: LocalProvider, valid_for: Any
) -> None:
    """valid_for of zero or less gives an approval whose expires_at has passed."""
    created = Api(provider.url, provider.credential).new()
    request = provider.approve(created["id"], valid_for=valid_for)
    assert request.decision is not None and request.decision.expires_at is not None
    assert request.decision.expires_at <= datetime.now(timezone.utc)


def test_approve_with_an_explicit_expires_at(provider: LocalProvider) -> None:
    """expires_at sets the approval's expiry outright."""
    created = Api(provider.url, provider.credential).new()
    moment = datetime(2020, 1, 1, tzinfo=timezone.utc)
    request = provider.approve(created["id"], expires_at=moment)
    assert request.decision is not None and moment == request.decision.expires_at


def test_deciding_twice_raises_not_pending(provider: LocalProvider) -> None:
    """approve/deny on a decided request raise NotPendingError carrying its state."""
    created = Api(provider.url, provider.credential).new()
    provider.deny(created["id"], "no")
    with pytest.raises(NotPendingError) as info:
        provider.approve(created["id"])
    assert "denied" == info.value.request.status


def test_unknown_ids_raise_lookup_error(provider: LocalProvider) -> None:
    """Driving an unknown id raises LookupError."""
    with pytest.raises(LookupError):
        provider.approve("nope")
    with pytest.raises(LookupError):
        provider.get("nope")


def test_cancel_and_requests(provider: LocalProvider) -> None:
    """cancel() withdraws a request; requests() lists them newest first."""
    api = Api(provider.url, provider.credential)
    first, second = api.new(), api.new()
    assert "cancelled" == provider.cancel(first["id"]).status
    assert [second["id"], first["id"]] == [r.id for r in provider.requests()]
    assert [second["id"]] == [r.id for r in provider.requests("pending")]


def test_clock_offset_moves_the_provider_clock() -> None:
    """clock_offset=-10m puts created_at ten minutes in the past."""
    with LocalProvider(clock_offset=timedelta(minutes=-10)) as provider:
        created = provider.store.now()
        behind = (datetime.now(timezone.utc) - created).total_seconds()
        assert 590 < behind < 610


@pytest.mark.slow
def test_pytest_plugin_fixtures(pytester: pytest.Pytester) -> None:
    """The plugin's approval_provider fixture is a running LocalProvider; guard is a Guard."""
    pytester.makepyfile(
        """
        import requests

        def test_provider(approval_provider):
            url = approval_provider.url + "/v1/requests"
            r = requests.post(
                url,
                json={"tool": "t", "arguments": {}, "timeout": "1m"},
                headers={"Authorization": "Bearer " + approval_provider.credential,
                         "Idempotency-Key": "k"},
                timeout=5,
            )
            assert r.status_code == 201

        def test_guard(guard):
            import approval_guard
            assert isinstance(guard, approval_guard.Guard)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_deny_policy_helper_is_importable() -> None:
    """deny_after is part of the testing helpers used above."""
    assert callable(deny_after(0.0, "no"))
