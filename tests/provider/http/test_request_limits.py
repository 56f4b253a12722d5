"""A request over the provider's limits (a 40 KB head, a body over 64 KiB) is a JSON 4xx,
nothing is stored, and everyone else is still answered.
"""

from __future__ import annotations

import json
import uuid

from approval_guard.provider import ProviderServer
from tests.support.api import Api
from tests.support.raw_http import connect, first_tokens, read_all


def test_a_request_head_over_the_limit_is_a_json_400_and_others_still_get_answers(
    server: ProviderServer,
) -> None:
    instance, _ = first_tokens(server)
    sock = connect(server)
    try:
        sock.sendall(
            b"GET /v1/requests/x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n"
        )
        raw = read_all(sock)
    finally:
        sock.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert "invalid_request" == json.loads(body)["error"]["type"]
    assert 404 == Api(server.url, instance).poll(str(uuid.uuid4())).status_code


def test_a_body_over_64_kib_is_413_and_nothing_is_stored(server: ProviderServer) -> None:
    instance, _ = first_tokens(server)
    api = Api(server.url, instance)
    response = api.create(arguments={"blob": "x" * (64 * 1024)})
    assert 413 == response.status_code
    assert "invalid_request" == response.json()["error"]["type"]
    assert [] == server.store.list_requests()
