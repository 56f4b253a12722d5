"""The fault proxy in front of a provider that is not ours: a plain http.server upstream.

Every fault kind, keep-alive, blind relay of what it cannot parse, a long
answer on one connection not delaying another, and stop() cutting everything.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import requests

from approval_guard.testing import FaultProxy
from tests.support.serving import BurstServer, serve_in_thread


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    created: list[bytes] = []
    #: Set when a "slow" poll has reached the upstream (the proxy waits for its answer).
    slow_started = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # a create
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Upstream.created.append(body)
        self._answer(201, {"id": f"r{len(_Upstream.created)}", "status": "pending"})

    def do_GET(self) -> None:  # a poll; "slow" waits 2 s first
        if "slow" in self.path:
            _Upstream.slow_started.set()
            time.sleep(2)
        self._answer(200, {"id": self.path.rsplit("/", 1)[-1], "status": "pending"})


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    _Upstream.created = []
    _Upstream.slow_started = threading.Event()
    upstream = BurstServer(("127.0.0.1", 0), _Upstream)
    upstream.daemon_threads = True
    serve_in_thread(upstream)
    stamp = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    with FaultProxy(f"http://127.0.0.1:{upstream.server_port}", clock=lambda: stamp) as running:
        yield running
    upstream.shutdown()
    upstream.server_close()


def _create(proxy: FaultProxy, session: requests.Session | None = None) -> requests.Response:
    return (session or requests).post(f"{proxy.url}/v1/requests", json={"tool": "t"}, timeout=10)


def test_requests_pass_through_and_are_counted(proxy: FaultProxy) -> None:
    session = requests.Session()
    assert 201 == _create(proxy, session).status_code
    assert 200 == session.get(f"{proxy.url}/v1/requests/r1", timeout=10).status_code
    assert (1, 1, 1) == (proxy.stats.creates, proxy.stats.created, proxy.stats.polls)


def test_drop_after_commit_forwards_then_hangs_up(proxy: FaultProxy) -> None:
    proxy.faults.add("drop_after_commit", on="create")
    with pytest.raises(requests.ConnectionError):
        _create(proxy)
    assert 1 == len(_Upstream.created)  # it reached the provider
    assert 201 == _create(proxy).status_code


def test_reset_before_forwards_nothing(proxy: FaultProxy) -> None:
    proxy.faults.add("reset_before", on="create")
    with pytest.raises(requests.ConnectionError):
        _create(proxy)
    assert [] == _Upstream.created
    assert ["reset_before"] == [record.kind for record in proxy.faults.log]


def test_status_answers_for_the_provider_with_retry_after_and_the_clock(proxy: FaultProxy) -> None:
    proxy.faults.add("status", on="create", status=429, retry_after=2.5)
    answer = _create(proxy)
    assert 429 == answer.status_code
    assert "rate_limited" == answer.json()["error"]["type"]
    assert "2.5" == answer.headers["Retry-After"]
    assert "Wed, 02 Jan 2030 03:04:05 GMT" == answer.headers["Date"]
    assert answer.headers["X-Request-ID"]
    assert [] == _Upstream.created


def test_garbage_forwards_then_answers_what_is_not_json(proxy: FaultProxy) -> None:
    proxy.faults.add("garbage", on="create")
    answer = _create(proxy)
    assert 200 == answer.status_code
    with pytest.raises(ValueError):
        answer.json()
    assert 1 == len(_Upstream.created)


def test_delay_waits_before_the_answer(proxy: FaultProxy) -> None:
    proxy.faults.add("delay", on="poll", delay=0.6)
    start = time.monotonic()
    assert 200 == requests.get(f"{proxy.url}/v1/requests/x", timeout=10).status_code
    assert time.monotonic() - start >= 0.6


def test_headers_are_added_and_a_date_replaces_the_providers(proxy: FaultProxy) -> None:
    proxy.faults.add("headers", on="poll", headers={"Date": "yesterday", "X-Extra": "1"})
    answer = requests.get(f"{proxy.url}/v1/requests/x", timeout=10)
    assert "yesterday" == answer.headers["Date"]
    assert "1" == answer.headers["X-Extra"]


def test_a_fault_is_aimed_at_its_exchange_and_used_times_times(proxy: FaultProxy) -> None:
    proxy.faults.add("status", on="poll", status=503, times=2)
    assert 201 == _create(proxy).status_code  # not a poll
    codes = [requests.get(f"{proxy.url}/v1/requests/x", timeout=10).status_code for _ in range(3)]
    assert [503, 503, 200] == codes
    assert 0 == proxy.faults.pending


def test_a_slow_answer_on_one_connection_does_not_hold_up_another(proxy: FaultProxy) -> None:
    slow = threading.Thread(
        target=lambda: requests.get(f"{proxy.url}/v1/requests/slow", timeout=10)
    )
    slow.start()
    assert _Upstream.slow_started.wait(5)
    start = time.monotonic()
    assert 201 == _create(proxy).status_code
    assert time.monotonic() - start < 1
    slow.join(10)


def test_what_it_cannot_parse_is_relayed_untouched(proxy: FaultProxy) -> None:
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GARBAGE LINE\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert b"Bad request syntax" in answer  # the upstream's own answer, byte for byte


def test_stop_cuts_a_waiting_answer_at_once(proxy: FaultProxy) -> None:
    out: list[Any] = []

    def call() -> None:
        try:
            requests.get(f"{proxy.url}/v1/requests/slow", timeout=10)
            out.append("answered")
        except requests.ConnectionError:
            out.append("cut")

    waiting = threading.Thread(target=call)
    waiting.start()
    assert _Upstream.slow_started.wait(5)
    start = time.monotonic()
    proxy.stop()
    waiting.join(5)
    assert ["cut"] == out
    assert time.monotonic() - start < 1.5
    proxy.start()  # the same port again
    assert 201 == _create(proxy).status_code


@pytest.mark.parametrize(
    ("kind", "options"),
    [("nope", {}), ("status", {"status": 404}), ("delay", {"delay": -1}), ("headers", {})],
)
def test_a_bad_fault_is_refused_when_added(
    proxy: FaultProxy, kind: str, options: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        proxy.faults.add(kind, **options)


def test_an_interim_100_continue_is_passed_on_with_the_answer(proxy: FaultProxy) -> None:
    host, port = proxy.url.removeprefix("http://").split(":")
    body = b'{"tool": "t"}'
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/requests HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert b"HTTP/1.1 201 " in answer
    assert 1 == proxy.stats.creates
