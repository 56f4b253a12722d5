"""An answer's head and body leave in one write; a held head is never left behind."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest
import uvicorn
from uvicorn.server import ServerState

from approval_guard.provider.http.one_write import OneWrite
from approval_guard.provider.http.protocols import has_httptools, protocol_class

PARSERS = ["h11", *(["httptools"] if has_httptools() else [])]


@attrs.define
class _Cycle:
    response_started: bool = False
    response_complete: bool = False


@attrs.define
class _Connection:
    cycle: _Cycle | None = None


class _Wire(asyncio.Transport):
    """A transport that keeps what was written, one entry per write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _started() -> tuple[_Wire, _Connection, _Cycle]:
    cycle = _Cycle(response_started=True)
    return _Wire(), _Connection(cycle), cycle


def test_head_and_body_go_out_in_one_write() -> None:
    """The head written at the answer's start waits for its body and leaves with it."""

    async def run() -> list[bytes]:
        wire, conn, _ = _started()
        one = OneWrite(wire, conn, asyncio.get_running_loop())
        one.write(b"HTTP/1.1 200 OK\r\n\r\n")
        one.write(b"{}")
        await asyncio.sleep(0)
        return wire.writes

    assert [b"HTTP/1.1 200 OK\r\n\r\n{}"] == asyncio.run(run())


def test_a_held_head_leaves_at_the_end_of_the_loop_step() -> None:
    """A head whose body does not follow at once is sent on the next loop step anyway."""

    async def run() -> tuple[list[bytes], list[bytes]]:
        wire, conn, _ = _started()
        one = OneWrite(wire, conn, asyncio.get_running_loop())
        one.write(b"head")
        before = list(wire.writes)
        await asyncio.sleep(0)
        return before, wire.writes

    assert ([], [b"head"]) == asyncio.run(run())


def test_close_sends_a_held_head_first() -> None:
    """Closing the connection sends what is held before the close."""

    async def run() -> tuple[list[bytes], bool]:
        wire, conn, _ = _started()
        one = OneWrite(wire, conn, asyncio.get_running_loop())
        one.write(b"head")
        one.close()
        return wire.writes, wire.closed

    assert ([b"head"], True) == asyncio.run(run())


def test_writes_outside_an_answer_pass_straight_through() -> None:
    """Before an answer starts (a 100 Continue, a 400) and after its head, nothing is held."""

    async def run() -> list[bytes]:
        wire, conn, cycle = _started()
        cycle.response_started = False
        one = OneWrite(wire, conn, asyncio.get_running_loop())
        one.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        cycle.response_started = True
        one.write(b"head")
        one.write(b"body-1")
        one.write(b"body-2")
        return list(wire.writes)

    assert [b"HTTP/1.1 100 Continue\r\n\r\n", b"headbody-1", b"body-2"] == asyncio.run(run())


async def _tiny_app(scope: Any, receive: Any, send: Any) -> None:
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


@pytest.mark.parametrize("parser", PARSERS)
def test_the_provider_protocol_sends_an_answer_in_one_write(parser: str) -> None:
    """Each of the provider's connection protocols writes once per answer."""

    async def run() -> list[bytes]:
        config = uvicorn.Config(_tiny_app, lifespan="off", log_config=None)
        made = protocol_class(5.0, parser=parser)
        protocol = made(config, ServerState(), {}, asyncio.get_running_loop())
        wire = _Wire()
        protocol.connection_made(wire)
        protocol.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(5):
            await asyncio.sleep(0)
        protocol.connection_lost(None)
        return wire.writes

    writes = asyncio.run(run())
    assert 1 == len(writes)
    assert writes[0].startswith(b"HTTP/1.1 200 ") and writes[0].endswith(b"\r\n\r\n{}")
