"""An adversarial review of the guard side: what it does with provider answers and arguments."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard._codec.serialize import dumps
from approval_guard._codec.wire import format_http_date, format_timestamp
from approval_guard._options.spec import provider_scope as _provider_scope
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard, refund_tool

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
    provider: LocalProvider, lagging: str, expected: ag.Reason
) -> None:
    """An approval that expired a minute ago, read through a Date lagging behind it: no run."""
    p = provider
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
    provider: LocalProvider, value: Any, shown: Any
) -> None:
    """A str/int/float/Decimal subclass is sent as the value the tool gets, not its conversions'."""
    p = provider
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


# -- a small hostile provider ----------------------------------------------------------


Route = Callable[[dict[str, Any], str], tuple[int, Any]]


class HostileProvider:
    """A provider on 127.0.0.1 that answers each exchange as the test says.

    ``create``/``read``/``cancel`` take the request object as created and the
    path, and return ``(status, body)``; ``body`` is JSON-encoded unless bytes.
    """

    def __init__(self, *, create: Route, read: Route, cancel: Route) -> None:
        self.routes = {"create": create, "read": read, "cancel": cancel}
        self.request: dict[str, Any] = {}
        self.seen: list[str] = []
        self.created = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def date_time_string(self, timestamp: float | None = None) -> str:
                return format_http_date(datetime.now(timezone.utc))

            def answer(self, kind: str) -> None:
                owner.seen.append(kind)
                status, body = owner.routes[kind](owner.request, self.path)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.answer("read")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.endswith("/cancel"):
                    self.answer("cancel")
                    return
                body = json.loads(raw)
                now = datetime.now(timezone.utc)
                owner.request = {
                    "id": "req-1",
                    "tool": body["tool"],
                    "arguments": body["arguments"],
                    "timeout": body["timeout"],
                    "status": "pending",
                    "created_at": format_timestamp(now),
                    "deadline_at": format_timestamp(now + timedelta(minutes=30)),
                }
                self.answer("create")
                owner.created.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def approved(request: dict[str, Any], **decision: Any) -> dict[str, Any]:
    now = datetime.now(timezone.utc)
    return {
        **request,
        "status": "approved",
        "decision": {
            "status": "approved",
            "note": None,
            "decided_at": format_timestamp(now),
            "expires_at": format_timestamp(now + timedelta(minutes=5)),
            **decision,
        },
    }


def hostile_guard(p: HostileProvider) -> ag.Guard:
    return ag.Guard(
        base_url=p.url,
        credential="cred-review-1",
        harness_limit="20s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
    )


@pytest.fixture
def hostile() -> Iterator[Callable[..., HostileProvider]]:
    made: list[HostileProvider] = []

    def make(**routes: Route) -> HostileProvider:
        defaults: dict[str, Route] = {
            "create": lambda r, _: (201, r),
            "read": lambda r, _: (200, r),
            "cancel": lambda r, _: (200, {**r, "status": "cancelled"}),
        }
        made.append(HostileProvider(**{**defaults, **routes}))
        return made[-1]

    yield make
    for p in made:
        p.close()


def _refund(guard: ag.Guard, ran: list[Any]) -> Callable[..., Any]:
    @guard.requires_approval(timeout="10s")
    def issue_refund(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return "refunded"

    return issue_refund


@pytest.mark.parametrize(
    ("edited", "runs"),
    [
        ({"payment_id": "p", "amount": 1}, True),  # the same arguments, echoed
        ({"payment_id": "p", "amount": 999999}, False),
        ({"payment_id": "p"}, False),
        ({"payment_id": "p", "amount": 1, "to": "attacker"}, False),
        ("not an object", False),
    ],
)
def test_an_approval_that_edits_arguments_never_offered_as_editable_does_not_run(
    hostile: Callable[..., HostileProvider], edited: Any, runs: bool
) -> None:
    """API 1.1: no name was sent as editable, so decision.arguments may only repeat the call."""
    p = hostile(create=lambda r, _: (201, approved(r, arguments=edited)))
    ran: list[Any] = []
    out = _refund(hostile_guard(p), ran)("p", 1)
    if runs:
        assert "refunded" == out and [("p", 1)] == ran
    else:
        assert [] == ran
        assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason, out


def _abandon_when_created(p: HostileProvider) -> threading.Event:
    abandon = threading.Event()

    def watch() -> None:
        p.created.wait(5)
        abandon.set()

    threading.Thread(target=watch, daemon=True).start()
    return abandon


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
        out = _refund(hostile_guard(p), ran)("p", 1)
    assert [] == ran and "cancel" in p.seen
    assert isinstance(out, ag.NotRun) and ag.Reason.CANCELLED == out.reason
    assert "was cancelled" not in out.message and "cancelled" != out.status, out


@pytest.mark.parametrize("status", [400, 401, 403, 404, 418])
def test_a_poll_refused_for_good_still_withdraws_the_request(
    hostile: Callable[..., HostileProvider], status: int
) -> None:
    """A poll answered with a non-retryable error: nobody waits any more, so the cancel is sent."""
    p = hostile(read=lambda r, _: (status, {"error": {"type": "nope", "message": "no"}}))
    ran: list[Any] = []
    out = _refund(hostile_guard(p), ran)("p", 1)
    assert [] == ran and ["create", "read", "cancel"] == p.seen
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert out.message.endswith("; the pending request was cancelled."), out.message


def test_arguments_changed_while_waiting_do_not_run(provider: LocalProvider) -> None:
    """The caller's list changes after the request was made: what would run was never seen."""
    payees = ["alice"]

    def mutate_then_approve(provider: LocalProvider, request: Any) -> None:
        payees.append("mallory")
        provider.approve(request.id)

    provider.policy = mutate_then_approve
    ran: list[Any] = []

    @make_guard(provider).requires_approval(timeout="1m")
    def pay(to: list[str]) -> str:
        ran.append(list(to))
        return "paid"

    out = pay(payees)
    [request] = provider.requests()
    assert {"to": ["alice"]} == request.arguments
    assert [] == ran
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason, out
    # The approval was not used up: nothing ran.
    assert None is make_guard(provider).ledger.get(request.id)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("http://localhost:{port}", "http://LOCALHOST.:{port}/"),
        ("http://[::1]:{port}", "http://[0:0:0:0:0:0:0:1]:{port}"),
    ],
)
def test_one_provider_spelled_two_ways_shares_one_record(first: str, second: str) -> None:
    """A host's trailing dot or an address's long form is the same provider: one claim."""
    assert _provider_scope(first.format(port=8080)) == _provider_scope(second.format(port=8080))



def denied(request: dict[str, Any], note: str) -> dict[str, Any]:
    now = format_timestamp(datetime.now(timezone.utc))
    return {
        **request,
        "status": "denied",
        "decision": {"status": "denied", "note": note, "decided_at": now},
    }


@pytest.mark.parametrize("note", ["\ud800", "no \udfff way", "\ud83d"])
def test_a_note_with_a_lone_surrogate_gives_an_outcome_that_can_be_written(
    hostile: Callable[..., HostileProvider], note: str
) -> None:
    """JSON may escape a lone surrogate; the NotRun's sentence and JSON must still encode."""
    raw = json.dumps(denied({}, note))  # escaped as \\udXXX, as a provider would send it
    p = hostile(create=lambda r, _: (201, {**r, **json.loads(raw)}))
    out = _refund(hostile_guard(p), [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.DENIED == out.reason
    str(out).encode("utf-8")
    out.to_json().encode("utf-8")
    assert out.note is not None and "\ufffd" in out.note
