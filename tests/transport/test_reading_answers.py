"""One reader for both transports: what an answer's bytes become, and its limits (size,
depth, compression), framing and encodings.
"""

from __future__ import annotations

from typing import Any

import pytest

import approval_guard as ag
from approval_guard.testing import LocalProvider
from tests.support.fakes import FakeProvider, make_tool
from tests.support.guards import make_guard, refund_tool
from tests.support.scripted import Reply, ScriptedServer, is_create, rewriting_proxy, set_header


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
