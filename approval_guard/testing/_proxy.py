"""A TCP fault proxy: stands between a guard and any HTTP/1.1 provider and breaks exchanges.

::

    with FaultProxy("http://127.0.0.1:8765") as proxy:   # ours, or your staging provider
        proxy.faults.add("drop_after_commit", on="create")
        guard = Guard(base_url=proxy.url, credential=...)

Each client connection gets a thread and its own upstream connection (opened
when needed; TCP_NODELAY on both). A request is forwarded as it came; the
fault queued for its exchange (see :class:`Faults`) acts before, instead of,
or after forwarding. :meth:`FaultProxy.stop` cuts every connection at once, as
a killed provider would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import selectors
import socket
import struct
import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

from approval_guard._codec.now import utcnow
from approval_guard._codec.wire import format_http_date
from approval_guard._codec.wire_models import error_body
from approval_guard.testing._faults import STATUS_ERROR_TYPES, Fault, Faults, Stats
from approval_guard.testing._http1 import Reader, Unparsable, exchange_of, parse, path_of

logger = logging.getLogger("approval_guard.testing")

_STAT = {
    "create": "creates",
    "poll": "polls",
    "cancel": "cancels",
    "decision": "decisions",
    "list": "lists",
}
_GARBAGE = b"<html>this is not JSON"


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"the upstream must be http://HOST:PORT, not {url!r}")
    return parts.hostname, parts.port


def _nodelay(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class FaultProxy:
    """Fault injection at the edge, for tests of code that talks to a provider.

    Args:
        upstream: The provider, ``http://HOST:PORT``.
        host: The address the proxy listens on.
        port: The port it listens on (0: any free one; see :attr:`url`).
        clock: The ``Date`` of answers the proxy makes itself (aware UTC).
    """

    def __init__(
        self,
        upstream: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._upstream = _address(upstream)
        self._clock = clock or utcnow
        self._host = host
        self._port = port
        #: The queued faults; see :class:`Faults`.
        self.faults = Faults()
        #: Exchange counters; see :class:`Stats`.
        self.stats = Stats()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._bind()

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    def __repr__(self) -> str:
        return f"FaultProxy(url={self.url!r}, upstream='http://{self._upstream[0]}:{self._upstream[1]}')"

    def set_upstream(self, url: str) -> None:
        """Forward new connections to another provider.

        Args:
            url: The other provider, ``http://HOST:PORT``.
        """
        self._upstream = _address(url)

    def _bind(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        sock.listen(4096)  # a burst of connects from a large suite (the kernel caps it)
        self._port = sock.getsockname()[1]
        self._listener = sock

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        """Accept connections in a background thread (again after :meth:`stop`: same port)."""
        if self._thread is not None:
            raise RuntimeError("the proxy is already running")
        if self._listener is None:
            self._bind()
        self._stopping.clear()
        listener = self._listener
        assert listener is not None
        self._thread = threading.Thread(
            target=self._accept, args=(listener,), name="approval-guard-fault-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and cut every connection now; waiting polls get no answer."""
        self._stopping.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _accept(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            _nodelay(client)
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
        if self._stopping.is_set():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _forget(self, sock: socket.socket | None, *, reset: bool = False) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.discard(sock)
        if reset:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif not reset:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    # ------------------------------------------------------------------ one connection

    def _connect(self) -> socket.socket:
        upstream = socket.create_connection(self._upstream, timeout=None)
        _nodelay(upstream)
        self._track(upstream)
        return upstream

    def _serve(self, client: socket.socket) -> None:
        reader = Reader(client)
        upstream: socket.socket | None = None
        reset = False
        try:
            while not self._stopping.is_set():
                raw: bytes | None = None
                try:
                    raw = reader.head()
                    if raw is None:
                        return
                    head = parse(raw, request=True)
                    length = head.length() or 0
                except Unparsable:
                    upstream = upstream or self._connect()
                    self._relay(client, upstream, (raw or b"") + reader.buffer)
                    return
                body = reader.exactly(length)
                method, target = head.first[0], head.first[1]
                exchange = exchange_of(method, target)
                fault = None
                if exchange is not None:
                    stat = _STAT.get(exchange)
                    if stat is not None:
                        self.stats.incr(stat)
                    fault = self.faults.take(exchange, path_of(target))
                if fault is not None and fault.kind == "reset_before":
                    reset = True
                    return
                if fault is not None and fault.kind == "status":
                    client.sendall(self._status_answer(fault))
                    continue
                upstream = self._fresh(upstream)
                if fault is not None and fault.kind == "delay":
                    if body:
                        upstream.sendall(raw)  # the head: a create claims its key now
                        raw = b""
                    if self._stopping.wait(fault.delay):
                        return
                upstream.sendall(raw + body)
                answer, closes = self._answer(Reader(upstream), method)
                if answer is None:
                    return  # the provider hung up without answering: so does the proxy
                if exchange == "create":
                    status = answer.split(b" ", 2)[1]
                    if status in (b"200", b"201"):
                        self.stats.incr("created" if status == b"201" else "replays")
                if fault is not None and fault.kind == "drop_after_commit":
                    return
                if fault is not None and fault.kind == "garbage":
                    client.sendall(self._made(200, _GARBAGE, close=True))
                    return
                if fault is not None and fault.kind == "headers":
                    answer = _with_headers(answer, fault)
                client.sendall(answer)
                if closes or head.closes:
                    return
        except OSError:
            return
        finally:
            self._forget(client, reset=reset)
            self._forget(upstream)

    def _fresh(self, upstream: socket.socket | None) -> socket.socket:
        """The upstream connection, replaced if the provider closed it while idle."""
        if upstream is not None:
            # A selector, not select(): select() fails on a descriptor past 1023, which a
            # process holding a few hundred connections soon has.
            with selectors.DefaultSelector() as idle:
                idle.register(upstream, selectors.EVENT_READ)
                if not idle.select(0):
                    return upstream
            self._forget(upstream)
        return self._connect()

    def _answer(self, reader: Reader, method: str) -> tuple[bytes | None, bool]:
        """The provider's whole answer as bytes, and whether it closes the connection."""
        interim = b""
        try:
            while True:
                raw = reader.head()
                if raw is None:
                    return None, True
                head = parse(raw, request=False)
                status = int(head.first[1]) if head.first[1].isdigit() else 0
                if not 100 <= status < 200:
                    break
                interim += raw  # "100 Continue" and the like: the real answer follows
            length = head.length()
        except (Unparsable, ConnectionError):
            return None, True
        raw = interim + raw
        if method == "HEAD" or status in (204, 304):
            return raw, head.closes
        if length is None:
            return raw + reader.until_close(), True
        return raw + reader.exactly(length), head.closes

    def _relay(self, client: socket.socket, upstream: socket.socket, pending: bytes) -> None:
        """Pass bytes both ways, untouched, until either side closes."""
        upstream.sendall(pending)
        with selectors.DefaultSelector() as both:
            both.register(client, selectors.EVENT_READ, (client, upstream))
            both.register(upstream, selectors.EVENT_READ, (upstream, client))
            while not self._stopping.is_set():
                for key, _ in both.select(1.0):
                    sock, peer = key.data
                    data = sock.recv(65536)
                    if not data:
                        return
                    peer.sendall(data)

    # ------------------------------------------------------------------ answers it makes

    def _made(
        self,
        status: int,
        body: bytes,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        close: bool = False,
    ) -> bytes:
        reason = {200: "OK", 429: "Too Many Requests"}.get(status, "Error")
        lines = [
            f"HTTP/1.1 {status} {reason}",
            f"X-Request-ID: {uuid.uuid4()}",
            f"Date: {format_http_date(self._clock())}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-store",
            *(f"{name}: {value}" for name, value in headers),
        ]
        if close:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def _status_answer(self, fault: Fault) -> bytes:
        headers: tuple[tuple[str, str], ...] = ()
        if fault.retry_after is not None:
            value = fault.retry_after
            headers = (("Retry-After", value if isinstance(value, str) else f"{value:g}"),)
        kind = STATUS_ERROR_TYPES.get(fault.status, "unavailable")
        body = json.dumps(error_body(kind, f"injected {fault.status} (fault injection)"))
        return self._made(fault.status, body.encode(), headers)


def _with_headers(answer: bytes, fault: Fault) -> bytes:
    """The answer with a ``headers`` fault's headers added (its ``Date`` replacing the own)."""
    end = answer.index(b"\r\n\r\n")
    lines = answer[:end].split(b"\r\n")
    if any(name.lower() == "date" for name, _ in fault.headers):
        lines = [line for line in lines if not line.lower().startswith(b"date:")]
    lines += [f"{name}: {value}".encode("latin-1") for name, value in fault.headers]
    return b"\r\n".join(lines) + answer[end:]
