"""Just enough HTTP/1.1 for the fault proxy: read one message head and body off a socket.

The proxy forwards bytes as they came; it parses only to find where a message
ends (``Content-Length``) and which API exchange a request is. Anything it
cannot read this way (a chunked body, a malformed line, a head over
:data:`MAX_HEAD`) is relayed blindly instead, so the provider's own answer
reaches the client byte for byte.
"""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

import attrs

MAX_HEAD = 64 * 1024
_CHUNK = 65536
_REQUEST_PATH = re.compile(r"/v1/requests/[^/]+(/cancel|/decision|/history)?")
_REVIEW_DECISION = re.compile(r"/review/requests/[^/]+/decision")


class Unparsable(Exception):
    """A message the proxy will not interpret; relay the connection blindly."""


@attrs.define
class Reader:
    """A socket and the bytes read from it but not yet used."""

    sock: socket.socket
    buffer: bytes = b""

    def head(self) -> bytes | None:
        """The next message head (up to and including the blank line); None at a clean EOF."""
        while b"\r\n\r\n" not in self.buffer:
            if len(self.buffer) > MAX_HEAD:
                raise Unparsable("head too large")
            chunk = self.sock.recv(_CHUNK)
            if not chunk:
                if self.buffer:
                    raise Unparsable("connection closed inside a head")
                return None
            self.buffer += chunk
        end = self.buffer.index(b"\r\n\r\n") + 4
        if end > MAX_HEAD:
            raise Unparsable("head too large")
        head, self.buffer = self.buffer[:end], self.buffer[end:]
        return head

    def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(_CHUNK)
            if not chunk:
                raise ConnectionError("connection closed inside a body")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def until_close(self) -> bytes:
        chunks = [self.buffer]
        self.buffer = b""
        while chunk := self.sock.recv(_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)


@attrs.frozen
class Head:
    """A parsed message head: its first line and its headers (names lowercased)."""

    raw: bytes
    first: list[str]
    headers: tuple[tuple[str, str], ...]

    def get(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def length(self) -> int | None:
        """The ``Content-Length``; None when absent; :class:`Unparsable` when unusable."""
        if self.get("transfer-encoding"):
            raise Unparsable("chunked")
        values = self.get("content-length")
        if not values:
            return None
        if len(set(values)) != 1 or not values[0].isdigit() or len(values[0]) > 18:
            raise Unparsable("bad Content-Length")
        return int(values[0])

    @property
    def closes(self) -> bool:
        return any(v.strip().lower() == "close" for v in self.get("connection"))


def parse(raw: bytes, *, request: bool) -> Head:
    """The head of a request (``METHOD TARGET HTTP/1.x``) or of a response."""
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise Unparsable("not text") from None
    lines = text[:-4].split("\r\n")
    first = lines[0].split(" ", 2)
    if request and (len(first) != 3 or not first[2].startswith("HTTP/1.")):
        raise Unparsable("bad request line")
    if not request and (len(first) < 2 or not first[0].startswith("HTTP/1.")):
        raise Unparsable("bad status line")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise Unparsable("bad header line")
        headers.append((name.lower(), value.strip()))
    return Head(raw=raw, first=first, headers=tuple(headers))


def exchange_of(method: str, target: str) -> str | None:
    """Which API exchange a request is (the names :class:`Faults` aims at), or None."""
    try:
        path = urlsplit(target).path
    except ValueError:
        return None
    if path == "/v1/requests":
        return {"POST": "create", "GET": "list"}.get(method)
    if path == "/v1/events":
        return "events" if method == "GET" else None
    if path == "/v1/requests/wait":
        # A batched wait (API 1.2) is the long polls of the calls it carries.
        return "poll" if method == "POST" else None
    if _REVIEW_DECISION.fullmatch(path):
        return "decision" if method == "POST" else None
    match = _REQUEST_PATH.fullmatch(path)
    if match is None:
        return None
    action = match.group(1)
    wanted = {
        None: ("GET", "poll"),
        "/cancel": ("POST", "cancel"),
        "/decision": ("POST", "decision"),
        "/history": ("GET", "history"),
    }[action]
    return wanted[1] if method == wanted[0] else None


def path_of(target: str) -> str:
    """A request target's path, for the fault log (never its query: it may hold a token)."""
    try:
        return urlsplit(target).path
    except ValueError:
        return "?"
