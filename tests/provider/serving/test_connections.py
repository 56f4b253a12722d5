"""The provider's connections: two hundred slow clients delay nobody, an unfinished head or
an idle keep-alive is closed, a waiting long poll is not, nor is one whose client left.

Real sockets on 127.0.0.1 against the Starlette + uvicorn server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import pytest

from approval_guard.provider import ProviderServer
from tests.support.api import Api, wait_for
from tests.support.raw_http import connect, first_tokens, read_all


def test_two_hundred_slow_clients_do_not_delay_anyone_else(server: ProviderServer) -> None:
    """200 clients dripping one byte a second: other requests answer within 100 ms of normal."""
    instance, _ = first_tokens(server)
    api = Api(server.url, instance)
    request_id = api.new()["id"]

    def timed_polls(n: int) -> list[float]:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            assert 200 == api.poll(request_id).status_code
            out.append(time.perf_counter() - start)
        return out

    baseline = max(timed_polls(20))
    slow = [connect(server) for _ in range(200)]
    stop = threading.Event()

    def drip() -> None:
        line = b"GET /v1/requests HTTP/1.1\r\n"
        for i in range(len(line)):
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.send(line[i : i + 1])
            if stop.wait(1.0):
                return

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        time.sleep(0.5)
        during = timed_polls(40)
    finally:
        stop.set()
        dripper.join(5)
        for sock in slow:
            sock.close()
    assert max(during) < baseline + 0.1, (baseline, max(during))


def test_a_client_that_never_finishes_its_head_is_disconnected(server: ProviderServer) -> None:
    sock = connect(server)
    try:
        sock.sendall(b"GET /v1/requ")
        start = time.monotonic()
        assert b"" == read_all(sock)  # closed by the server, with no answer
        assert 1.5 < time.monotonic() - start < 6
    finally:
        sock.close()


def test_an_idle_keep_alive_connection_is_closed_after_its_timeout(
    server: ProviderServer,
) -> None:
    sock = connect(server)
    try:
        sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: a\r\n\r\n")
        first = b""
        while not first.endswith(b"}}"):  # the whole 401 answer: its body ends the JSON
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 401 ")
        start = time.monotonic()
        assert b"" == read_all(sock)
        assert 0.5 < time.monotonic() - start < 5
    finally:
        sock.close()


def test_a_waiting_long_poll_is_not_cut_by_the_timeouts(server: ProviderServer) -> None:
    """A poll waiting longer than the keep-alive and head timeouts still gets its answer."""
    instance, reviewer = first_tokens(server)
    api = Api(server.url, instance)
    request_id = api.new()["id"]
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(api.poll(request_id, wait="4s")))
    thread.start()
    time.sleep(3)
    Api(server.url, reviewer).decide(request_id, {"status": "approved"})
    thread.join(10)
    assert "approved" == result[0].json()["status"]


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "5"])
def test_bad_timeouts_are_refused_when_the_server_is_made(bad: Any) -> None:
    with pytest.raises(ValueError, match="keep_alive_seconds"):
        ProviderServer(":memory:", keep_alive_seconds=bad)


def test_a_poll_whose_client_hangs_up_stops_waiting(server: ProviderServer) -> None:
    instance, _ = first_tokens(server)
    api = Api(server.url, instance)
    ids = [api.new()["id"] for _ in range(20)]
    clients = []
    for request_id in ids:
        sock = connect(server)
        sock.sendall(
            f"GET /v1/requests/{request_id}?wait=60s HTTP/1.1\r\nHost: a\r\n"
            f"Authorization: Bearer {instance}\r\n\r\n".encode()
        )
        clients.append(sock)
    assert server.wait_for_waiting_polls(20, timeout=10)
    for sock in clients:
        sock.close()
    # Not held until the 60 s wait ends:
    wait_for(lambda: server.waiting_polls == 0, timeout=5, what="the polls are still held")
