"""Raw HTTP to a provider: any bytes, repeated headers, and strict reading of what comes back."""

from __future__ import annotations

import http.client
import json
import socket
import uuid
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from approval_guard.provider import ProviderServer
from approval_guard.testing import LocalProvider


def strict_json(text: str) -> Any:
    """Parse as a strict, lossless reader would: no NaN/Infinity, no duplicate keys."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} in the provider's answer")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        assert len({key for key, _ in items}) == len(items), items
        return dict(items)

    return json.loads(
        text,
        parse_constant=no_constant,
        object_pairs_hook=pairs,
        parse_int=Decimal,
        parse_float=Decimal,
    )


def send(
    provider: LocalProvider,
    method: str,
    path: str,
    body: bytes = b"",
    headers: list[tuple[str, str]] | None = None,
    *,
    token: str | None = None,
    content_length: bool = True,
) -> tuple[int, bytes]:
    """One raw HTTP exchange: headers may repeat, bodies may be any bytes."""
    parts = urlsplit(provider.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        if token is not None:
            conn.putheader("Authorization", f"Bearer {token}")
        for name, value in headers or []:
            conn.putheader(name, value)
        if content_length and not any(n.lower() == "content-length" for n, _ in headers or []):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def create_raw(provider: LocalProvider, body: bytes, key: str | None = None) -> tuple[int, bytes]:
    headers = [("Content-Type", "application/json"), ("Idempotency-Key", key or str(uuid.uuid4()))]
    return send(provider, "POST", "/v1/requests", body, headers, token=provider.credential)


def body_with(arguments: str, tool: str = '"t"') -> bytes:
    return f'{{"tool":{tool},"arguments":{arguments},"timeout":"30m"}}'.encode()


def listed(provider: LocalProvider, query: str = "") -> dict[str, Any]:
    status, raw = send(provider, "GET", f"/v1/requests{query}", token=provider.reviewer_credential)
    assert 200 == status, raw
    result: dict[str, Any] = strict_json(raw.decode())
    return result


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def first_tokens(server: ProviderServer) -> tuple[str, str]:
    tokens = server.first_start_tokens
    assert tokens is not None
    return tokens.instance, tokens.reviewer


def connect(server: ProviderServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)
