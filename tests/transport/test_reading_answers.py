"""One reader for both transports: what an answer's bytes become, and its limits (size,
depth, compression), framing and encodings.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._codec.clock import SystemClock
from approval_guard._transport import exchange
from approval_guard._transport.answer import TransportError
from approval_guard._transport.async_client import AsyncProviderClient
from approval_guard._transport.sync_client import ProviderClient
from approval_guard.testing import LocalProvider
from tests.support.fakes import FakeProvider, make_tool
from tests.support.guards import make_guard, refund_tool
from tests.support.scripted import Reply, ScriptedServer, is_create, rewriting_proxy, set_header

SECRET = "agi_native_secret_value"


# -- one interpretation for both transports --------------------------------------------


class CannedProvider:
    """A raw socket answering every request with the same bytes, then closing."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                with contextlib.suppress(OSError):
                    conn.sendall(self.answer)


def _http(status: str, headers: dict[str, str], body: bytes, *, length: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _zeros_gzipped(mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1 << 20)
    return b"".join(packer.compress(chunk) for _ in range(mib)) + packer.flush()


CANNED = {
    "not json": _http("200 OK", {}, b"<html>hi</html>"),
    "json array": _http("200 OK", {}, b"[1, 2]"),
    "declares 2 MiB": _http("200 OK", {"Content-Length": str(2 << 20)}, b"{}", length=False),
    "over 1 MiB": _http("200 OK", {}, b'{"a": "' + b"x" * (1 << 20) + b'"}'),
    "cut off": _http("200 OK", {"Content-Length": "100"}, b'{"a": 1', length=False),
    "503 retry after": _http(
        "503 Service Unavailable",
        {"Retry-After": "7", "Content-Type": "application/json"},
        b'{"error": {"type": "unavailable", "message": "later"}}',
    ),
    "echoed secret": _http(
        "404 Not Found",
        {"X-Request-ID": f"id-{SECRET}"},
        b'{"error": {"type": "not_found", "message": "no ' + SECRET.encode() + b'"}}',
    ),
    "ok": _http("200 OK", {"Date": "Wed, 16 Sep 2026 12:00:00 GMT"}, b'{"id": "r1", "n": 1.0}'),
    "gzip ok": _http("200 OK", {"Content-Encoding": "gzip"}, gzip.compress(b'{"id": "r1"}')),
    # A few KiB that would become 64 MiB: refused at 1 MiB, never inflated in memory.
    "gzip bomb": _http("200 OK", {"Content-Encoding": "gzip"}, _zeros_gzipped(64)),
    "gzip twice": _http(
        "200 OK",
        {"Content-Encoding": "gzip, gzip"},
        gzip.compress(gzip.compress(b'{"id": "r1"}')),
    ),
    "unknown encoding": _http("200 OK", {"Content-Encoding": "br"}, b"\x0b\x02\x80{}\x03"),
    "bad gzip": _http("200 OK", {"Content-Encoding": "gzip"}, b"\x1f\x8bnot gzip at all"),
    "interim 103 then 201": b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
    + _http("201 Created", {}, b'{"id": "r1"}'),
}


def _outcome(perform: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        answer = perform()
    except TransportError as exc:
        return ("error", exc.kind)
    return (
        answer.status,
        answer.body,
        answer.retry_after,
        answer.provider_request_id,
        answer.sample.date,
    )


@pytest.mark.parametrize("case", sorted(CANNED))
def test_both_transports_read_an_answer_the_same_way(case: str) -> None:
    """requests (sync) and httpx (async) hand the one shared reader the same answer."""
    canned = CannedProvider(CANNED[case])
    clock = SystemClock()
    spec = exchange.read("r1", wait=0, timeout=5)
    sync = ProviderClient(canned.url, SECRET, clock=clock)
    aclient = AsyncProviderClient(canned.url, SECRET, clock=clock)

    async def both() -> tuple[Any, ...]:
        try:
            return _outcome_async(await _attempt(aclient, spec))
        finally:
            await aclient.aclose()

    try:
        got_sync = _outcome(lambda: sync.perform(spec))
        got_async = asyncio.run(both())
    finally:
        sync.close()
        canned.sock.close()
    if case == "interim 103 then 201":
        # h11 skips an interim answer; urllib3 hands it over as final, so the sync
        # transport calls it a lost answer (the create is replayed with its key).
        assert ("error", "garbage") == got_sync and 201 == got_async[0]
        return
    assert got_sync == got_async
    assert SECRET not in repr(got_sync)
    if "bomb" in case:
        assert ("error", "too_large") == got_sync


async def _attempt(client: AsyncProviderClient, spec: exchange.ExchangeSpec) -> Any:
    try:
        return await client.perform(spec)
    except TransportError as exc:
        return exc


def _outcome_async(result: Any) -> tuple[Any, ...]:
    if isinstance(result, TransportError):
        return ("error", result.kind)
    return _outcome(lambda: result)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_compressed_bomb_is_refused_without_being_inflated(flavour: str) -> None:
    """64 MiB of zeros in a few KiB of gzip: refused at 1 MiB, with a few MiB of memory at most."""
    canned = CannedProvider(CANNED["gzip bomb"])
    clock = SystemClock()
    spec = exchange.read("r1", wait=0, timeout=10)
    tracemalloc.start()
    try:
        if flavour == "sync":
            client = ProviderClient(canned.url, SECRET, clock=clock)
            with pytest.raises(TransportError) as caught:
                client.perform(spec)
            client.close()
        else:
            aclient = AsyncProviderClient(canned.url, SECRET, clock=clock)

            async def go() -> Any:
                try:
                    return await _attempt(aclient, spec)
                finally:
                    await aclient.aclose()

            result = asyncio.run(go())
            assert isinstance(result, TransportError)
            caught = pytest.ExceptionInfo.from_exception(result)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        canned.sock.close()
    assert "too_large" == caught.value.kind
    assert peak < 8 << 20, peak


# From the hardening pass, item 2: headers are parsed strictly and never raise.
@pytest.mark.parametrize(
    "body",
    [b"[" * 200_000 + b"]" * 200_000, b'{"a": ' * 100_000 + b"1" + b"}" * 100_000],
    ids=["deep_list", "deep_object"],
)
def test_a_create_answer_too_deep_to_decode_is_retried_and_the_request_adopted(
    approving: LocalProvider, servers: list[ScriptedServer], body: bytes
) -> None:
    """A body that makes the JSON decoder give up is garbage: the retried create adopts it."""
    spoiled: list[str] = []

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        if is_create(method, path) and not spoiled:
            spoiled.append(path)
            reply.body = body
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    tool = refund_tool(make_guard(approving, base_url=url), ran)
    assert {"refund_id": "re_1", "amount": 1} == tool("p_1", 1)
    assert [("p_1", 1, "GBP")] == ran
    assert 1 == len(approving.requests())


# From the hardening pass, item 2: headers are parsed strictly and never raise.
@pytest.mark.parametrize("length", ["\u00b2", "\u00b9\u00b2", "1" * 5000])
def test_a_content_length_that_is_not_ascii_digits_does_not_break_the_call(
    approving: LocalProvider, servers: list[ScriptedServer], length: str
) -> None:
    """Content-Length is read as ASCII digits or not at all: the call goes on and runs once."""
    spoiled: list[str] = []

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        if is_create(method, path) and not spoiled:
            spoiled.append(path)
            return set_header(reply, "Content-Length", length)
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(
        make_guard(approving, base_url=url), ran
    )("p_1", 1)
    assert [("p_1", 1, "GBP")] == ran


# From the hardening pass, item 2: nothing a provider sends may make the call raise.
def test_an_answer_too_deep_to_handle_is_not_obtained(
    fake: FakeProvider, unit_guard: ag.Guard
) -> None:
    """Arguments nested past the recursion limit in an answer: NOT_OBTAINED, no exception."""
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    fake.script[0] = ("raw", {"arguments": {"payment_id": deep}})
    with ag.harness_call(limit="1m"):
        out = make_tool(unit_guard, [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.NOT_OBTAINED == out.reason
