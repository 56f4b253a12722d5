"""A connection's transport that sends an answer's head and its body in one write.

uvicorn's protocols write the status line and headers when the app starts its
answer, and the body when it sends it: two ``send()`` calls, two trips into
the kernel for every small JSON answer, which on a busy machine cost more than
building the answer does. :class:`OneWrite` stands in for the connection's
transport: the head of an answer is held until the next write (its body, in
the same step of the event loop for every answer the provider makes) and goes
out with it. Held bytes are never left behind: a close, or the end of the
loop step, sends them first.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class _Cycle(Protocol):
    """The part of uvicorn's request/response cycle :class:`OneWrite` reads."""

    response_started: bool
    response_complete: bool


class _Connection(Protocol):
    @property
    def cycle(self) -> _Cycle | None: ...


class OneWrite(asyncio.Transport):
    """``transport``, with the head of ``connection``'s current answer held until its body."""

    def __init__(
        self,
        transport: asyncio.Transport,
        connection: _Connection,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        super().__init__()
        self.transport = transport
        self._connection = connection
        self._loop = loop
        self._held: bytes | None = None
        # The cycle whose head has been written (or held): its later writes are body.
        self._headed: object = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return  # h11's end of a Content-Length body: nothing to send
        held = self._held
        if held is not None:
            self._held = None
            self.transport.write(held + bytes(data))
            return
        cycle = self._connection.cycle
        if (
            cycle is not None
            and cycle is not self._headed
            and cycle.response_started
            and not cycle.response_complete
        ):
            # The head of this cycle's answer: wait for its body, at most this loop step.
            self._headed = cycle
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self.transport.write(data)

    def flush(self) -> None:
        """Send a held head now."""
        held = self._held
        if held is not None:
            self._held = None
            if not self.transport.is_closing():  # a lost connection takes nothing more
                self.transport.write(held)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self._held = None
        self.transport.abort()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)
