"""Async calls' long polls carried by batched waits (API 1.2), and every way back to plain GETs."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import asyncio
import os
import resource
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.wire import format_timestamp
from approval_guard.testing import LocalProvider, Timings, approve_after
from tests.support.hostile import HostileProvider, approved, denied
from tests.support.scripted import Reply, ScriptedServer, rewriting_proxy

Make = Callable[..., HostileProvider]


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def _guard(url: str, credential: str, **options: Any) -> ag.Guard:
    settings: dict[str, Any] = {
        "base_url": url,
        "credential": credential,
        "harness_limit": "20s",
        "poll_wait": "2s",
        "return_margin": "1s",
        "deadline_margin": "1s",
        "ledger": ag.MemoryLedger(),
    }
    settings.update(options)
    return ag.Guard(**settings)


def _refund(guard: ag.Guard, ran: list[Any]) -> Callable[..., Any]:
    @guard.requires_approval(timeout="10m")
    async def issue_refund(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return "refunded"

    return issue_refund


def _call(guard: ag.Guard, ran: list[Any]) -> Any:
    async def main() -> Any:
        try:
            return await _refund(guard, ran)("p_1", 100)
        finally:
            await guard.aclose()

    return asyncio.run(main())


@pytest.mark.slow
def test_a_thousand_waiting_calls_share_a_few_connections(provider: LocalProvider) -> None:
    """1,000 async calls on one loop wait on a few sockets, not one each, and each runs once."""
    calls = 1_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    # The server itself, not its fault proxy: the proxy holds a batch cut short until it ends.
    url = provider.server.url
    guard = _guard(url, provider.credential, harness_limit="5m", poll_wait="60s")
    ran: list[int] = []

    @guard.requires_approval(timeout="10m")
    async def refund(n: int) -> int:
        ran.append(n)
        return n

    async def main() -> tuple[list[Any], int]:
        before = _sockets()
        tasks = [asyncio.create_task(refund(n)) for n in range(calls)]
        deadline = time.monotonic() + 120
        while len(provider.requests("pending")) < calls or not provider.wait_for_polls(calls, 0):
            assert time.monotonic() < deadline, "the calls did not all start waiting"
            await asyncio.sleep(0.1)
        # The creates' connections beyond the kept ones close (a poll each would never).
        deadline = time.monotonic() + 10
        while _sockets() - before >= 300 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        waiting = _sockets() - before
        for request in provider.requests("pending"):
            await asyncio.to_thread(provider.approve, request.id)
        results = await asyncio.wait_for(asyncio.gather(*tasks), 120)
        await guard.aclose()
        return results, waiting

    results, waiting = asyncio.run(main())
    assert list(range(calls)) == results
    assert list(range(calls)) == sorted(ran)
    # Each connection is counted twice here (client and server), and up to 64 idle
    # keep-alive ones stay from the creates; a poll each would be 2,000.
    assert waiting < 300, waiting


def test_one_call_is_carried_by_a_batched_wait(
    provider: LocalProvider, servers: list[ScriptedServer]
) -> None:
    """Against the local provider an async call's poll is a batched wait (no GET), and it runs."""
    seen: list[tuple[str, str]] = []

    def record(method: str, path: str, reply: Reply) -> Reply:
        seen.append((method, path.split("?")[0]))
        return reply

    url = rewriting_proxy(servers, provider.url, record)
    provider.policy = approve_after(0.3)
    ran: list[Any] = []
    assert "refunded" == _call(_guard(url, provider.credential), ran)
    assert [("p_1", 100)] == ran
    assert ("POST", "/v1/requests/wait") in seen
    assert [] == [path for method, path in seen if method == "GET"]


def test_a_provider_without_batched_waits_gets_plain_polls_for_good(hostile: Make) -> None:
    """404 on the batch path: the poll is the plain GET, and no batch is tried again."""
    reads: list[int] = []

    def read(request: dict[str, Any], path: str) -> tuple[int, Any]:
        reads.append(1)
        return (200, request) if len(reads) < 3 else (200, approved(request))

    p = hostile(read=read)
    ran: list[Any] = []
    assert "refunded" == _call(_guard(p.url, "cred-1"), ran)
    assert [("p_1", 100)] == ran
    assert 1 == len(p.waits)
    assert 3 <= len(reads)


def test_a_batched_approval_is_read_as_a_get_answer(hostile: Make) -> None:
    """An approval from the batch runs the tool once, after the same checks as a GET answer."""
    p = hostile(wait=lambda r, _: (200, {"requests": [approved(r)], "not_found": []}))
    ran: list[Any] = []
    assert "refunded" == _call(_guard(p.url, "cred-1"), ran)
    assert [("p_1", 100)] == ran
    assert [{"ids": ["req-1"], "wait": "30s"}] == p.waits[:1]
    assert "read" not in p.seen


def test_a_batched_denial_is_a_denial(hostile: Make) -> None:
    """A denial from the batch is the person's denial, with their note."""
    p = hostile(wait=lambda r, _: (200, {"requests": [denied(r, "no")], "not_found": []}))
    result = _call(_guard(p.url, "cred-1"), [])
    assert isinstance(result, ag.NotRun)
    assert (ag.Reason.DENIED, "no") == (result.reason, result.note)


def test_a_batched_approval_past_its_expiry_does_not_run(hostile: Make) -> None:
    """The expiry check applies to an approval a batch carried."""
    past = format_timestamp(datetime.now(timezone.utc) - timedelta(seconds=5))

    def wait(r: dict[str, Any], _: str) -> tuple[int, Any]:
        return 200, {"requests": [approved(r, expires_at=past)], "not_found": []}

    ran: list[Any] = []
    result = _call(_guard(hostile(wait=wait).url, "cred-1"), ran)
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.APPROVAL_EXPIRED == result.reason
    assert [] == ran


def test_other_arguments_in_a_batched_item_do_not_run(hostile: Make) -> None:
    """An item echoing other arguments than the call sent is not this call: NotRun, not denied."""

    def wait(r: dict[str, Any], _: str) -> tuple[int, Any]:
        return 200, {"requests": [approved({**r, "arguments": {"x": 1}})], "not_found": []}

    ran: list[Any] = []
    result = _call(_guard(hostile(wait=wait).url, "cred-1"), ran)
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == result.reason
    assert [] == ran


def _doubtful(kind: str, request: dict[str, Any]) -> tuple[int, Any]:
    item = approved(request)
    return {
        "500": (500, {"error": {"type": "internal_error", "message": "x"}}),
        "not json": (200, b"{nope"),
        "no list": (200, {"requests": "all of them"}),
        "not_found not a list": (200, {"requests": [item], "not_found": 3}),
        "twice": (200, {"requests": [item, denied(request, "no")], "not_found": []}),
        "unparseable": (200, {"requests": [{"id": "req-1", "status": 7}], "not_found": []}),
        "not found": (200, {"requests": [], "not_found": ["req-1"]}),
        "a list": (200, [item]),
        "a single request": (201, item),
    }[kind]


@pytest.mark.parametrize(
    "kind",
    [
        "500",
        "not json",
        "no list",
        "not_found not a list",
        "twice",
        "unparseable",
        "not found",
        "a list",
        "a single request",
    ],
)
def test_a_doubtful_batch_answer_falls_back_to_the_get(hostile: Make, kind: str) -> None:
    """Whatever is wrong with a batch's answer, the call reads its GET and follows that."""
    p = hostile(wait=lambda r, _: _doubtful(kind, r), read=lambda r, _: (200, denied(r, "via GET")))
    result = _call(_guard(p.url, "cred-1"), [])
    assert isinstance(result, ag.NotRun)
    assert (ag.Reason.DENIED, "via GET") == (result.reason, result.note)
    assert "read" in p.seen


def test_an_item_not_asked_for_is_ignored(hostile: Make) -> None:
    """An item about a request the batch did not list is not taken for the call's."""
    answers: list[int] = []

    def wait(r: dict[str, Any], _: str) -> tuple[int, Any]:
        answers.append(1)
        if len(answers) == 1:
            return 200, {"requests": [denied({**r, "id": "req-2"}, "other")], "not_found": []}
        return 200, {"requests": [approved(r)], "not_found": []}

    ran: list[Any] = []
    assert "refunded" == _call(_guard(hostile(wait=wait).url, "cred-1"), ran)
    assert [("p_1", 100)] == ran


def test_a_batch_answering_nothing_at_once_is_not_a_busy_loop(hostile: Make) -> None:
    """A provider answering every batch at once with nothing is asked again only after pauses."""
    p = hostile(wait=lambda r, _: (200, {"requests": [], "not_found": []}))
    started = time.monotonic()
    result = _call(_guard(p.url, "cred-1", harness_limit="6s", poll_wait="2s"), [])
    assert isinstance(result, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == result.reason
    assert "nobody denied it" in result.message
    assert time.monotonic() - started < 10
    assert len(p.waits) <= 15, len(p.waits)


def test_a_cancelled_waiting_call_leaves_nothing_behind(provider: LocalProvider) -> None:
    """Cancelling the task of a call waiting in a batch withdraws its request; others still run."""
    guard = _guard(provider.url, provider.credential, poll_wait="30s")
    ran: list[Any] = []
    tool = _refund(guard, ran)

    async def main() -> Any:
        doomed = asyncio.create_task(tool("p_1", 100))
        kept = asyncio.create_task(tool("p_2", 200))
        deadline = time.monotonic() + 10
        while not provider.wait_for_polls(2, 0):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        [pending] = [r for r in provider.requests("pending") if r.arguments["payment_id"] == "p_2"]
        await asyncio.to_thread(provider.approve, pending.id)
        result = await asyncio.wait_for(kept, 10)
        await guard.aclose()
        return result

    assert "refunded" == asyncio.run(main())
    assert [("p_2", 200)] == ran
    assert ["cancelled"] == [
        r.status for r in provider.requests() if r.arguments["payment_id"] == "p_1"
    ]


def test_a_new_call_with_every_batch_in_flight_is_answered_at_once(
    provider: LocalProvider,
) -> None:
    """Past the cap of batches in flight, a new call's decision still reaches it within a second."""
    from approval_guard._transport.async_wait import MAX_BATCHES

    guard = _guard(provider.url, provider.credential, poll_wait="30s")
    ran: list[int] = []

    @guard.requires_approval(timeout="10m")
    async def refund(n: int) -> int:
        ran.append(n)
        return n

    async def main() -> float:
        tasks = []
        for n in range(MAX_BATCHES + 3):  # one at a time: each into a batch of its own
            tasks.append(asyncio.create_task(refund(n)))
            deadline = time.monotonic() + 10
            while not provider.wait_for_polls(n + 1, 0):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
        client = guard._aclient
        assert client is not None
        # Every call waits in a batch (the provider holds its poll): never more than the cap.
        assert MAX_BATCHES == client._clients[asyncio.get_running_loop()].waits.batches
        last = next(r for r in provider.requests("pending") if r.arguments["n"] == MAX_BATCHES + 2)
        decided = time.monotonic()
        await asyncio.to_thread(provider.approve, last.id)
        assert MAX_BATCHES + 2 == await asyncio.wait_for(tasks[-1], 10)
        lag = time.monotonic() - decided
        for request in provider.requests("pending"):
            await asyncio.to_thread(provider.approve, request.id)
        assert list(range(MAX_BATCHES + 3)) == await asyncio.wait_for(asyncio.gather(*tasks), 20)
        await guard.aclose()
        return lag

    assert asyncio.run(main()) < 1.0


def test_creates_wait_their_turn_and_each_is_timed_from_when_it_is_sent(hostile: Make) -> None:
    """512 calls at once: at most 64 creates in flight, and a queued one keeps its whole timeout.

    Eight rounds of 0.5 s creates take 4 s, longer than the 3 s create timeout: a
    create timed from when it was queued would time out and be sent again; each has
    2.5 s to spare for a loaded machine (a default run's other workers start twenty
    processes at once).
    """
    from approval_guard._transport.async_drive import CREATES

    lock = threading.Lock()
    in_flight, most, made = [0], [0], [0]
    requests: dict[str, dict[str, Any]] = {}

    def create(r: dict[str, Any], _: str) -> tuple[int, Any]:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            made[0] += 1
            rid = f"req-{made[0]}"
            requests[rid] = {**r, "id": rid}
        time.sleep(0.5)
        with lock:
            in_flight[0] -= 1
        return 201, requests[rid]

    def read(r: dict[str, Any], path: str) -> tuple[int, Any]:
        return 200, approved(requests[path.split("/")[3].split("?")[0]])

    p = hostile(create=create, read=read)
    guard = _guard(p.url, "cred-1", timings=Timings(create_timeout=3.0))
    ran: list[Any] = []
    tool = _refund(guard, ran)

    async def main() -> list[Any]:
        try:
            return await asyncio.gather(*(tool(f"p_{n}", n) for n in range(512)))
        finally:
            await guard.aclose()

    assert ["refunded"] * 512 == asyncio.run(main())
    assert 512 == made[0]  # none timed out in the queue and was sent again
    assert 1 < most[0] <= CREATES


def test_batches_answering_nothing_at_once_are_given_up_for_the_get(hostile: Make) -> None:
    """After 3 empty answers at once the client stops batching: the GET's approval runs soon."""
    p = hostile(
        wait=lambda r, _: (200, {"requests": [], "not_found": []}),
        read=lambda r, _: (200, approved(r)),
    )
    started = time.monotonic()
    ran: list[Any] = []
    assert "refunded" == _call(_guard(p.url, "cred-1", poll_wait="10s"), ran)
    assert time.monotonic() - started < 8  # not at the end of the 20 s harness limit
    assert 3 == len(p.waits)


def test_a_batch_route_failing_again_and_again_is_given_up(hostile: Make) -> None:
    """A gateway answering the route 403 every time: 3 batches, then only plain polls."""
    reads: list[int] = []

    def read(r: dict[str, Any], _: str) -> tuple[int, Any]:
        reads.append(1)
        return 200, (approved(r) if len(reads) > 6 else r)

    p = hostile(
        wait=lambda r, _: (403, {"error": {"type": "forbidden", "message": "no"}}), read=read
    )
    ran: list[Any] = []
    assert "refunded" == _call(_guard(p.url, "cred-1"), ran)
    assert 7 == len(reads)
    assert 3 == len(p.waits)
