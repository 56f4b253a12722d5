"""An exchange nothing can abandon runs on the calling thread, and its deadline still holds.

With a harness abandon event the create and the polls still run in a helper
thread the caller can leave (tests/call/test_abandon.py shows it returns
promptly); without one they run where the call is, under the watchdog.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._call.ops import Exchange, Ran, Timings
from approval_guard._codec.clock import ClockSample, SystemClock
from approval_guard._transport.answer import Answer
from approval_guard._transport.exchange import ExchangeSpec
from approval_guard._transport.sync_client import ProviderClient
from approval_guard._transport.sync_drive import drive_sync
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard, refund_tool


class ThreadRecordingClient(ProviderClient):
    """The real sync client, noting which thread performed each exchange."""

    def __init__(self, base_url: str, credential: str) -> None:
        super().__init__(base_url, credential, clock=SystemClock())
        self.threads: list[tuple[str, int]] = []

    def perform(self, spec: ExchangeSpec) -> Answer:
        self.threads.append((spec.method, threading.get_ident()))
        return super().perform(spec)


def recording(guard: ag.Guard, url: str, credential: str) -> ThreadRecordingClient:
    client = ThreadRecordingClient(url, credential)
    guard._client = client
    return client


def test_the_create_runs_on_the_callers_thread_when_nothing_can_abandon_it(
    provider: LocalProvider,
) -> None:
    """No abandon event: the create and the polls are performed by the calling thread itself."""
    provider.policy = approve_after(0.3)
    guard = make_guard(provider)
    client = recording(guard, provider.url, provider.credential)
    ran: list[Any] = []
    out = refund_tool(guard, ran)("p", 1)
    assert {"refund_id": "re_1", "amount": 1} == out
    assert "POST" == client.threads[0][0]
    assert {threading.get_ident()} == {ident for _, ident in client.threads}


def test_the_create_runs_in_a_helper_thread_when_the_harness_may_abandon(
    provider: LocalProvider,
) -> None:
    """With an abandon event the create is handed to a helper thread the caller can leave."""
    provider.policy = approve_after(0.0)
    guard = make_guard(provider)
    client = recording(guard, provider.url, provider.credential)
    with ag.harness_call(abandon=threading.Event()):
        refund_tool(guard, [])("p", 1)
    assert "POST" == client.threads[0][0]
    assert threading.get_ident() != client.threads[0][1]


def test_a_provider_named_by_host_name_is_reached_from_a_helper_thread(
    provider: LocalProvider,
) -> None:
    """A DNS lookup cannot be cut short, so ``localhost`` is reached from a helper thread."""
    provider.policy = approve_after(0.0)
    url = provider.url.replace("127.0.0.1", "localhost")
    guard = make_guard(provider, base_url=url)
    client = recording(guard, url, provider.credential)
    refund_tool(guard, [])("p", 1)
    assert threading.get_ident() != client.threads[0][1]


class SilentProvider:
    """A provider on a raw socket that reads each request and then ``answer``\\s it (or not)."""

    def __init__(self, answer: Callable[[socket.socket, threading.Event], None]) -> None:
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                if conn.recv(65536):
                    self.answer(conn, self.stop)
            except OSError:
                return


def never(conn: socket.socket, stop: threading.Event) -> None:
    """Never a byte back."""
    stop.wait(60)


def drip_headers(conn: socket.socket, stop: threading.Event) -> None:
    """A status line and headers a byte at a time, each well within a read timeout."""
    for byte in b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n" * 20:
        if stop.wait(0.3):
            return
        conn.sendall(bytes([byte]))


@pytest.fixture(params=[never, drip_headers], ids=["never answers", "drips its headers"])
def silent(request: pytest.FixtureRequest) -> Iterator[SilentProvider]:
    provider = SilentProvider(request.param)
    yield provider
    provider.stop.set()
    provider.sock.close()


def test_the_deadline_bounds_a_hanging_create_on_the_callers_thread(
    silent: SilentProvider,
) -> None:
    """A create that hangs on the caller's thread still ends in a NotRun within the limit."""
    guard = ag.Guard(
        base_url=silent.url,
        credential="agi_x",
        harness_limit="4s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
    )
    client = recording(guard, silent.url, "agi_x")
    ran: list[Any] = []
    started = time.monotonic()
    out = refund_tool(guard, ran)("p", 1)
    assert time.monotonic() - started < 4.0
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
    assert "no answer in time" in out.message
    assert [] == ran
    assert client.threads and {threading.get_ident()} == {i for _, i in client.threads}


def _one_exchange(timeout: float) -> Generator[Any, Any, Any]:
    spec = ExchangeSpec("GET", "/v1/requests/r1?wait=0s", None, {}, timeout)
    answer = yield Exchange(spec, abandonable=True)
    return Ran(answer)


def _answer(spec: ExchangeSpec) -> Answer:
    return Answer(
        status=200,
        body={"thread": threading.get_ident()},
        provider_request_id=None,
        sample=ClockSample(sent=0.0, received=0.0, date=None),
    )


@pytest.mark.parametrize(
    ("abandon", "timeout", "here_able", "on_caller"),
    [
        (False, 5.0, True, True),
        (True, 5.0, True, False),
        (True, 0.1, True, True),
        (False, 5.0, False, False),
    ],
    ids=["no abandon", "abandonable", "deadline before the next look", "transport cannot"],
)
def test_the_driver_performs_here_only_when_no_abandon_can_come_first(
    abandon: bool, timeout: float, here_able: bool, on_caller: bool
) -> None:
    """``here`` is used unless an abandon event could end the wait before the deadline."""

    def here(spec: ExchangeSpec) -> Callable[[ExchangeSpec], Answer] | None:
        return _answer if here_able else None

    outcome = drive_sync(
        _one_exchange(timeout),
        lambda op: None,
        SystemClock(),
        threading.Event() if abandon else None,
        perform=_answer,
        here=here,
        timings=Timings(abandon_check_interval=0.2),
    )
    assert isinstance(outcome, Ran)
    assert on_caller == (threading.get_ident() == outcome.value.body["thread"])
