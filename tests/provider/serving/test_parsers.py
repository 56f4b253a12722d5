"""Both connection protocols (httptools and h11) keep the same limits, deadlines and 400s."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from approval_guard.provider import ProviderServer
from approval_guard.provider.http.limits import MAX_HEAD_BYTES
from approval_guard.provider.http.protocols import has_httptools, protocol_class
from tests.support.api import Api
from tests.support.raw_http import connect, first_tokens, read_all

PARSERS = ["h11", *(["httptools"] if has_httptools() else [])]


@pytest.fixture(params=PARSERS)
def served(request: pytest.FixtureRequest) -> Iterator[ProviderServer]:
    """A provider in memory on each parser, keep-alive 1 s and client timeout 2 s."""
    with ProviderServer(
        ":memory:", keep_alive_seconds=1, client_timeout_seconds=2, http_parser=request.param
    ) as running:
        yield running


def _answer(raw: bytes) -> tuple[bytes, dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], json.loads(body)


def test_a_head_that_never_finishes_is_cut_off(served: ProviderServer) -> None:
    """A client that never ends its head is disconnected at the deadline, with no answer."""
    sock = connect(served)
    try:
        sock.sendall(b"GET /v1/requ")
        start = time.monotonic()
        assert b"" == read_all(sock)
        assert 1.5 < time.monotonic() - start < 6
    finally:
        sock.close()


def test_a_header_that_grows_past_the_limit_is_a_json_400(served: ProviderServer) -> None:
    """An endless header, sent a piece at a time, is refused once past the head limit."""
    instance, _ = first_tokens(served)
    sock = connect(served)
    try:
        sock.sendall(b"GET /v1/requests/x HTTP/1.1\r\nHost: a\r\nX-Big: ")
        sent = 0
        try:
            while sent < 4 * MAX_HEAD_BYTES:
                sock.sendall(b"a" * 1024)
                sent += 1024
                time.sleep(0.002)  # separate reads on the server
        except OSError:
            pass  # the server answered and closed while more was on its way
        raw = read_all(sock)
    finally:
        sock.close()
    status, body = _answer(raw)
    assert status.startswith(b"HTTP/1.1 400 ")
    assert "invalid_request" == body["error"]["type"]  # type: ignore[index]
    assert 404 == Api(served.url, instance).poll(str(uuid.uuid4())).status_code


def test_a_malformed_request_line_is_a_json_400(served: ProviderServer) -> None:
    """A request the parser refuses is answered in the API's error shape, and closed."""
    sock = connect(served)
    try:
        sock.sendall(b"GET /v1/requests HTTP/1.1 extra\r\n\r\n")
        raw = read_all(sock)
    finally:
        sock.close()
    status, body = _answer(raw)
    assert status.startswith(b"HTTP/1.1 400 ")
    assert "invalid_request" == body["error"]["type"]  # type: ignore[index]
    assert b"connection: close" in raw.lower()


def test_keep_alive_answers_come_whole_on_each_parser(served: ProviderServer) -> None:
    """Several requests on one connection each get their whole answer, in order."""
    instance, _ = first_tokens(served)
    api = Api(served.url, instance)
    ids = [api.new()["id"] for _ in range(3)]
    sock = connect(served)
    try:
        pipelined = b"".join(
            f"GET /v1/requests/{rid} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {instance}\r\n"
            "\r\n".encode()
            for rid in ids
        )
        sock.sendall(
            pipelined + b"GET /v1/requests/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        )
        raw = read_all(sock)
    finally:
        sock.close()
    found = [rid for rid in ids if f'"id":"{rid}"'.encode() in raw.replace(b" ", b"")]
    assert (ids, 4) == (found, raw.count(b"HTTP/1.1 "))


def test_an_unknown_parser_is_refused_when_the_server_is_made() -> None:
    """A misspelt parser name raises at once, before anything is bound."""
    with pytest.raises(ValueError, match="http_parser"):
        ProviderServer(":memory:", http_parser="llhttp")
    with pytest.raises(ValueError, match="http_parser"):
        protocol_class(5.0, parser="fast")
