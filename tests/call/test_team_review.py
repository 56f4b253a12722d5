"""The adapter in a team: requested_by sent and checked, decided_by surfaced, quorums waited on.

Real HTTP on 127.0.0.1: a LocalProvider with a rules file, named reviewers made
with the store, decisions posted to ``/v1/requests/{id}/decision`` with each
reviewer's own bearer token. The echo checks run against the scripted fake.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard import _default
from approval_guard._env import ENV_REQUESTED_BY, default_guard_settings
from approval_guard.testing import LocalProvider
from tests.support.api import wait_for
from tests.support.fakes import FakeProvider, make_tool
from tests.support.guards import in_thread, make_guard

RULES = """\
[tools.issue_refund]
approvals_required = 2

[tools.delete_user]
self_approval = false
"""
REVIEWERS = ("alice", "bob", "carol")


@pytest.fixture(name="team")
def team_fixture(tmp_path: Path) -> Iterator[tuple[LocalProvider, dict[str, str]]]:
    """A LocalProvider with :data:`RULES` and the reviewers alice, bob and carol (tokens)."""
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    with LocalProvider(str(tmp_path / "team.sqlite3"), rules=rules) as provider:
        tokens = {name: provider.store.add_reviewer(name) for name in REVIEWERS}
        yield provider, tokens


def decide(provider: LocalProvider, token: str, request_id: str, **body: Any) -> requests.Response:
    """A reviewer's decision over the API, with their own bearer token."""
    return requests.post(
        f"{provider.server.url}/v1/requests/{request_id}/decision",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def until(predicate: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    wait_for(predicate, timeout=timeout, what=f"timed out waiting for {what}")


def _refund_tools(guard: ag.Guard, ran: list[Any]) -> dict[str, Callable[..., Any]]:
    @guard.requires_approval(timeout="10m")
    def issue_refund(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return "refunded"

    @guard.requires_approval(timeout="10m", tool="issue_refund")
    async def issue_refund_async(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return "refunded"

    return {
        "sync": lambda: issue_refund("p_1", 4900),
        "async": lambda: asyncio.run(issue_refund_async("p_1", 4900)),
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_two_approvals_needed_the_call_waits_for_the_second_person_then_runs_once(
    team: tuple[LocalProvider, dict[str, str]], kind: str
) -> None:
    """alice: still waiting, not run; alice again: 409; bob: runs once, decided_by both."""
    provider, tokens = team
    events: list[Any] = []
    ran: list[Any] = []
    guard = make_guard(provider, on_event=events.append)
    thread, box = in_thread(_refund_tools(guard, ran)[kind])
    request = provider.next_request(timeout=10)
    assert provider.wait_for_polls(1, timeout=10)

    first = decide(provider, tokens["alice"], request.id, status="approved")
    assert 200 == first.status_code, first.text
    assert "pending" == first.json()["status"]

    def counted() -> bool:
        return any(isinstance(e, ag.StillWaiting) and e.approvals == 1 for e in events)

    until(counted, "a StillWaiting with one approval")
    waiting = next(e for e in events if isinstance(e, ag.StillWaiting) and e.approvals == 1)
    assert 2 == waiting.approvals_required
    assert [] == ran and thread.is_alive()

    again = decide(provider, tokens["alice"], request.id, status="approved")
    assert 409 == again.status_code, again.text
    assert "already_approved" == again.json()["error"]["type"]

    second = decide(provider, tokens["bob"], request.id, status="approved")
    assert 200 == second.status_code, second.text
    thread.join(20)
    assert not thread.is_alive()
    assert "error" not in box, box.get("error")
    assert "refunded" == box["out"]
    assert [("p_1", 4900)] == ran
    decided = [e for e in events if isinstance(e, ag.Decided)]
    assert 1 == len(decided)
    assert "approved" == decided[0].status
    assert "alice, bob" == decided[0].decided_by
    guard.close()


def test_the_requesting_person_may_not_approve_their_own_call(
    team: tuple[LocalProvider, dict[str, str]],
) -> None:
    """harness_call(requested_by="alice"), self_approval false: alice gets 403, bob's runs it."""
    provider, tokens = team
    ran: list[Any] = []
    guard = make_guard(provider)

    @guard.requires_approval(timeout="10m")
    def delete_user(user_id: str) -> str:
        ran.append(user_id)
        return "deleted"

    def call() -> Any:
        with ag.harness_call(requested_by="alice"):
            return delete_user("u_1")

    thread, box = in_thread(call)
    request = provider.next_request(timeout=10)
    assert "alice" == provider.get(request.id).requested_by
    own = decide(provider, tokens["alice"], request.id, status="approved")
    assert 403 == own.status_code, own.text
    assert "forbidden" == own.json()["error"]["type"]
    assert [] == ran
    other = decide(provider, tokens["bob"], request.id, status="approved")
    assert 200 == other.status_code, other.text
    thread.join(20)
    assert "deleted" == box.get("out"), box
    assert ["u_1"] == ran
    guard.close()


def test_guard_requested_by_is_the_default_and_harness_call_wins(
    team: tuple[LocalProvider, dict[str, str]],
) -> None:
    """Guard(requested_by="carol") is sent unless harness_call names someone else."""
    provider, tokens = team
    guard = make_guard(provider, requested_by="carol")
    assert "carol" == guard.requested_by

    @guard.requires_approval(timeout="10m")
    def delete_user(user_id: str) -> str:
        return "deleted"

    def harness_says(name: str | None) -> Callable[[], Any]:
        def call() -> Any:
            if name is None:
                return delete_user("u_1")
            with ag.harness_call(requested_by=name):
                return delete_user("u_1")

        return call

    for name, expected in ((None, "carol"), ("bob", "bob")):
        thread, box = in_thread(harness_says(name))
        request = provider.next_request(timeout=10)
        assert expected == provider.get(request.id).requested_by
        own = decide(provider, tokens[expected], request.id, status="approved")
        assert 403 == own.status_code, own.text
        denied = decide(provider, tokens["alice"], request.id, status="denied")
        assert 200 == denied.status_code, denied.text
        thread.join(20)
        assert isinstance(box.get("out"), ag.NotRun), box
    guard.close()


def test_a_denial_names_who_denied_in_the_not_run_the_event_and_the_log(
    team: tuple[LocalProvider, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """bob denies: NotRun(DENIED) carries decided_by (repr, to_dict), so do Decided and the log."""
    provider, tokens = team
    events: list[Any] = []
    ran: list[Any] = []
    guard = make_guard(provider, on_event=events.append)
    caplog.set_level(logging.INFO, logger="approval_guard")
    thread, box = in_thread(_refund_tools(guard, ran)["sync"])
    request = provider.next_request(timeout=10)
    denied = decide(provider, tokens["bob"], request.id, status="denied", note="too much")
    assert 200 == denied.status_code, denied.text
    thread.join(20)
    out = box.get("out")
    assert isinstance(out, ag.NotRun), box
    assert ag.Reason.DENIED == out.reason
    assert "bob" == out.decided_by
    assert "too much" == out.note
    assert "decided_by='bob'" in repr(out)
    assert "bob" == out.to_dict()["decided_by"]
    assert "bob" == json.loads(out.to_json())["decided_by"]
    assert [] == ran
    assert ["bob"] == [e.decided_by for e in events if isinstance(e, ag.Decided)]
    lines = [r.getMessage() for r in caplog.records if "request decided" in r.getMessage()]
    assert 1 == len(lines) and lines[0].endswith("status=denied decided_by=bob"), lines
    guard.close()


# -- the echo of requested_by (scripted fake provider) -------------------------------------


@pytest.mark.parametrize("echo", [True, False], ids=["1.1-echoes", "1.0-silent"])
def test_requested_by_is_sent_and_a_matching_or_missing_echo_is_accepted(
    fake: FakeProvider, unit_guard: ag.Guard, echo: bool
) -> None:
    """The create body carries requested_by; an echo of it, or none (API 1.0), lets the call run."""
    fake.echo_requested_by = echo
    fake.script[0] = ("approve", 300, "fine")
    ran: list[Any] = []
    with ag.harness_call(requested_by="Zoë Müller <zoe@example.com>"):
        out = make_tool(unit_guard, ran)("p", 1)
    assert {"refunded": 1} == out
    assert 1 == len(ran)
    body = json.loads(fake.creates[0][3] or b"")
    assert "Zoë Müller <zoe@example.com>" == body["requested_by"]


@pytest.mark.parametrize(
    ("sent", "at"),
    [("alice", 0), ("alice", 5), (None, 0)],
    ids=["create-echo", "poll-echo", "echo-when-none-sent"],
)
def test_an_echo_of_another_requested_by_is_not_this_call(
    fake: FakeProvider, unit_guard: ag.Guard, sent: str | None, at: int
) -> None:
    """A provider naming another person (or one when none was sent): NOT_OBTAINED, withdrawn."""
    fake.script[at] = ("raw", {"requested_by": "mallory"})
    fake.script[at + 10] = ("approve", 300, "fine")
    ran: list[Any] = []
    with ag.harness_call(requested_by=sent):
        out = make_tool(unit_guard, ran)("p", 1)
    assert isinstance(out, ag.NotRun), out
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert "different requested_by" in out.message
    assert [] == ran
    assert 1 == len(fake.cancels)


def test_requested_by_is_part_of_the_idempotent_body(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """The same key for another person is another request: the provider's 422 is NOT_OBTAINED."""
    fake.script[0] = ("approve", 300, "fine")
    ran: list[Any] = []
    tool = make_tool(unit_guard, ran)
    with ag.harness_call(idempotency_key="tc_person", requested_by="alice"):
        assert {"refunded": 1} == tool("p", 1)
    with ag.harness_call(idempotency_key="tc_person", requested_by="bob"):
        out = tool("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "422" in out.message
    assert 1 == len(ran)
    bodies = [json.loads(c[3] or b"") for c in fake.creates]
    assert ["alice", "bob"] == [b["requested_by"] for b in bodies]


# -- validation --------------------------------------------------------------------------

BAD_NAMES = [
    "",
    " alice",
    "alice ",
    "a" * 201,
    "ali\nce",
    "ali\x1bce",
    "ali\u202ece",
    "ali\u200bce",
    "\u3164",
    5,
    b"alice",
]


@pytest.mark.parametrize("bad", BAD_NAMES, ids=repr)
def test_a_bad_requested_by_is_refused_when_the_guard_or_harness_call_is_made(bad: Any) -> None:
    """Empty, over 200, control/bidi/invisible characters, padded, not a str: ConfigurationError."""
    with pytest.raises(ag.ConfigurationError, match="requested_by"):
        ag.Guard(base_url="http://127.0.0.1:1", credential="tok_x", requested_by=bad)
    with pytest.raises(ValueError, match="requested_by"), ag.harness_call(requested_by=bad):
        pytest.fail("the block must not run")


@pytest.mark.parametrize("good", ["a", "a" * 200, "alice@example.com", "Zoë Müller"])
def test_a_plain_requested_by_is_accepted(good: str) -> None:
    """Up to 200 printable characters, any script."""
    guard = ag.Guard(base_url="http://127.0.0.1:1", credential="tok_x", requested_by=good)
    assert good == guard.requested_by
    with ag.harness_call(requested_by=good) as facts:
        assert good == facts.requested_by


def test_the_default_guard_takes_requested_by_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """APPROVAL_GUARD_REQUESTED_BY sets the default Guard's; a bad value is refused by name."""
    monkeypatch.setenv("APPROVAL_GUARD_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("APPROVAL_GUARD_CREDENTIAL", "tok_env")
    monkeypatch.delenv(ENV_REQUESTED_BY, raising=False)
    assert _default.default_guard().requested_by is None
    monkeypatch.setenv(ENV_REQUESTED_BY, "alice@example.com")
    assert "alice@example.com" == default_guard_settings().requested_by
    assert "alice@example.com" == _default.default_guard().requested_by
    monkeypatch.setenv(ENV_REQUESTED_BY, "alice\tbob")
    with pytest.raises(ag.ConfigurationError, match=ENV_REQUESTED_BY):
        _default.default_guard()


def test_local_provider_rules_bind_its_own_approve_too() -> None:
    """LocalProvider(rules=Rules): the testing reviewer's approval counts as one of two."""
    from approval_guard.provider.rules.config import parse_rules
    from approval_guard.provider.store.models import AlreadyApproved

    with LocalProvider(rules=parse_rules(RULES)) as provider:
        assert 2 == provider.server.rules.for_tool("issue_refund").approvals_required
        guard = make_guard(provider)
        thread, box = in_thread(_refund_tools(guard, [])["sync"])
        request = provider.next_request(timeout=10)
        assert 2 == provider.get(request.id).approvals_required  # type: ignore[attr-defined]
        assert "pending" == provider.approve(request.id).status
        with pytest.raises(AlreadyApproved):
            provider.approve(request.id)
        provider.deny(request.id, note="no")
        thread.join(20)
        assert isinstance(box.get("out"), ag.NotRun)
        assert "testing reviewer" == box["out"].decided_by
        guard.close()


def test_a_providers_decided_by_is_bounded_and_scrubbed_before_anyone_reads_it(
    fake: FakeProvider, unit_guard: ag.Guard, clock: Any
) -> None:
    """Control characters become spaces, a secret-shaped part is starred, the length is bounded."""
    from approval_guard._codec.wire import NAMES_LIMIT, format_timestamp

    name = "bob\x1b[2J\u202e token=agi_leaked_1234 " + "x" * 2000
    decision = {
        "status": "denied",
        "note": None,
        "decided_at": format_timestamp(clock.now()),
        "decided_by": name,
    }
    fake.script[0] = ("raw", {"status": "denied", "decision": decision})
    out = make_tool(unit_guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.DENIED == out.reason
    shown = out.decided_by
    assert shown is not None and shown.startswith("bob")
    assert len(shown) <= NAMES_LIMIT + 3
    assert shown.isprintable()
    assert "agi_leaked_1234" not in shown
