"""Load on a server under test, from outside its process: raw HTTP/1.1 clients, poll holders.

The server benchmark measures whatever answers the provider API's paths: the
provider or the bare Starlette floor (``_server_floor.py``). The client here
is a few lines over asyncio streams (no client library's cost in the
figures): keep-alive connections, one request at a time each,
``Content-Length`` bodies only.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing.connection
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ._common import raise_fd_limit

T = TypeVar("T")
Item = TypeVar("Item")

#: How many connections one poll-holding process opens at once (the rest wait their turn).
CONNECT_AT_ONCE = 256


class RawConnection:
    """One keep-alive HTTP/1.1 connection: write a request, read one answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str):
        self._reader = reader
        self._writer = writer
        self._host = host

    @classmethod
    async def open(cls, url: str) -> RawConnection:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, f"{host}:{port}")

    def send(
        self,
        method: str,
        target: str,
        *,
        token: str | None = None,
        body: object = None,
        idempotency_key: str | None = None,
    ) -> None:
        """Write one request (without waiting for the answer)."""
        payload = b"" if body is None else json.dumps(body).encode()
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host}"]
        if token is not None:
            lines.append(f"Authorization: Bearer {token}")
        if idempotency_key is not None:
            lines.append(f"Idempotency-Key: {idempotency_key}")
        if method != "GET":
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)

    async def drain(self) -> None:
        await self._writer.drain()

    async def read(self) -> tuple[int, dict[str, Any]]:
        """The next answer: its status code and its JSON body ({} when empty)."""
        head = await self._reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        length = 0
        for line in header_lines:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                raise ValueError("the benchmark client reads Content-Length bodies only")
        body = await self._reader.readexactly(length) if length else b""
        return status, (json.loads(body) if body else {})

    async def call(
        self,
        method: str,
        target: str,
        *,
        token: str | None = None,
        body: object = None,
        idempotency_key: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        self.send(method, target, token=token, body=body, idempotency_key=idempotency_key)
        await self.drain()
        return await self.read()

    def close(self) -> None:
        self._writer.close()


async def fan_out(
    url: str,
    items: Iterable[Item],
    connections: int,
    one: Callable[[RawConnection, Item], Awaitable[T]],
) -> dict[Item, T]:
    """Run ``one(connection, item)`` for every item over ``connections`` keep-alive connections."""
    pending = iter(items)
    done: dict[Item, T] = {}
    conns = [await RawConnection.open(url) for _ in range(connections)]

    async def worker(conn: RawConnection) -> None:
        for item in pending:
            done[item] = await one(conn, item)

    try:
        await asyncio.gather(*(worker(conn) for conn in conns))
    finally:
        for conn in conns:
            conn.close()
    return done


def create_body(k: int) -> dict[str, Any]:
    return {"tool": "bench_server", "arguments": {"n": k}, "timeout": "30m"}


async def create_many(url: str, token: str, n: int, connections: int) -> list[str]:
    """Create ``n`` requests; their ids, in order."""

    async def one(conn: RawConnection, k: int) -> str:
        status, body = await conn.call(
            "POST", "/v1/requests", token=token, body=create_body(k),
            idempotency_key=str(uuid.uuid4()),
        )  # fmt: skip
        if status != 201:
            raise RuntimeError(f"a create was answered {status}, not 201")
        return str(body["id"])

    made = await fan_out(url, range(n), connections, one)
    return [made[k] for k in range(n)]


def creates_per_second(url: str, token: str, total: int, connections: int) -> float:
    """Creates per second over ``connections`` keep-alive connections (after a warm-up)."""
    asyncio.run(create_many(url, token, connections, connections))
    started = time.perf_counter()
    asyncio.run(create_many(url, token, total, connections))
    return total / (time.perf_counter() - started)


async def approve_all(
    url: str, token: str, ids: Sequence[str], connections: int
) -> dict[str, tuple[float, float, int]]:
    """Approve every id as fast as the reviewer connections go: ``{id: (sent, answered, status)}``.

    ``sent`` is taken just before the request is written (perf_counter is
    CLOCK_MONOTONIC, shared by every process on the machine).
    """

    async def one(conn: RawConnection, request_id: str) -> tuple[float, float, int]:
        sent = time.perf_counter()
        status, _ = await conn.call(
            "POST", f"/v1/requests/{request_id}/decision", token=token,
            body={"status": "approved", "valid_for": "5m"},
        )  # fmt: skip
        return sent, time.perf_counter(), status

    return await fan_out(url, ids, connections, one)


async def statuses(url: str, token: str, ids: Sequence[str], connections: int) -> dict[str, str]:
    """Each request's current status as its creator reads it (``wait=0s``)."""

    async def one(conn: RawConnection, request_id: str) -> str:
        status, body = await conn.call("GET", f"/v1/requests/{request_id}?wait=0s", token=token)
        return str(body.get("status")) if status == 200 else f"HTTP {status}"

    return await fan_out(url, ids, connections, one)


# --------------------------------------------------------------------------- poll holders


def hold_polls(
    pipe: multiprocessing.connection.Connection, url: str, token: str, ids: list[str], wait: str
) -> None:
    """(In a client process.) One connection per id, each a waiting long poll; report answers.

    Sends ``("ready", connected, errors)`` once every GET is written, then
    ``("done", {id: (answered_at, http_status, status)}, errors)``.
    """
    raise_fd_limit(len(ids) + 256)
    asyncio.run(_hold(pipe, url, token, ids, wait))


async def _hold(
    pipe: multiprocessing.connection.Connection, url: str, token: str, ids: list[str], wait: str
) -> None:
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)
    errors: list[str] = []
    answered: dict[str, tuple[float, int, str]] = {}

    async def start(request_id: str) -> RawConnection | None:
        async with gate:
            try:
                conn = await RawConnection.open(url)
                conn.send("GET", f"/v1/requests/{request_id}?wait={wait}", token=token)
                await conn.drain()
            except OSError as exc:
                errors.append(f"connect: {exc!r}")
                return None
        return conn

    async def answer(request_id: str, conn: RawConnection) -> None:
        try:
            status, body = await conn.read()
            answered[request_id] = (time.perf_counter(), status, str(body.get("status")))
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            errors.append(f"answer: {exc!r}")
        finally:
            conn.close()

    conns = await asyncio.gather(*(start(request_id) for request_id in ids))
    pipe.send(("ready", sum(1 for conn in conns if conn is not None), errors[:5]))
    await asyncio.gather(
        *(answer(rid, conn) for rid, conn in zip(ids, conns, strict=True) if conn is not None)
    )
    pipe.send(("done", answered, errors[:5]))


class PollHolders:
    """``processes`` client processes that share ``ids`` out and hold a long poll on each."""

    def __init__(self, url: str, token: str, ids: Sequence[str], processes: int, wait: str):
        ctx = multiprocessing.get_context("spawn")
        self._pipes: list[multiprocessing.connection.Connection] = []
        self._procs: list[Any] = []
        for k in range(processes):
            mine, theirs = ctx.Pipe()
            share = list(itertools.islice(ids, k, None, processes))
            proc = ctx.Process(target=hold_polls, args=(theirs, url, token, share, wait))
            proc.daemon = True
            proc.start()
            self._pipes.append(mine)
            self._procs.append(proc)

    def _collect(self, kind: str, timeout: float) -> list[tuple[Any, list[str]]]:
        deadline = time.monotonic() + timeout
        got = []
        for pipe in self._pipes:
            if not pipe.poll(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"a poll-holding process did not report {kind!r} in time")
            label, value, errors = pipe.recv()
            if label != kind:
                raise RuntimeError(f"a poll-holding process said {label!r}, not {kind!r}")
            got.append((value, errors))
        return got

    def ready(self, timeout: float) -> tuple[int, list[str]]:
        """How many polls were sent (after every process sent all of its own), and errors."""
        reports = self._collect("ready", timeout)
        return sum(n for n, _ in reports), [e for _, errors in reports for e in errors]

    def answers(self, timeout: float) -> tuple[dict[str, tuple[float, int, str]], list[str]]:
        reports = self._collect("done", timeout)
        merged: dict[str, tuple[float, int, str]] = {}
        for answered, _ in reports:
            merged.update(answered)
        return merged, [e for _, errors in reports for e in errors]

    def close(self) -> None:
        for proc in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for pipe in self._pipes:
            pipe.close()
