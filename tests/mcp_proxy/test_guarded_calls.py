"""Guarded tools/call through the real proxy: approved runs the tool once; else never."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.support.frameworks import require_framework

require_framework("mcp")

import anyio  # noqa: E402
import pytest  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard._codec.wire_models import ApprovalRequest  # noqa: E402
from approval_guard.testing import LocalProvider, Policy, approve_after, deny_after  # noqa: E402
from tests.support.mcp_proxy import RECORDER, proxied, recorded, text_of, third_party  # noqa: E402

NOTE = {"name": "groceries", "text": "milk", "copies": 1, "price": 1.5}


def _call(
    provider: LocalProvider,
    record: Path,
    tool: str,
    arguments: dict[str, Any],
    *flags: str,
) -> Any:
    async def call() -> Any:
        child = [*RECORDER, str(record)]
        async with proxied(provider, ["--guard", "write_*,delete_*", *flags], child) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(call)


def test_an_approved_call_runs_once_with_the_requests_arguments(
    provider: LocalProvider, record: Path
) -> None:
    """The request is the call's tool and arguments; approved, the child runs it once."""
    provider.policy = approve_after(0.1)
    result = _call(provider, record, "write_note", NOTE)
    assert not result.is_error
    assert text_of(result).startswith("write_note done:")
    [request] = provider.requests()
    assert ("write_note", NOTE, "approved") == (request.tool, request.arguments, request.status)
    assert [{"tool": "write_note", "arguments": NOTE}] == recorded(record)


def test_an_approved_third_party_call_returns_its_structured_result(
    provider: LocalProvider,
) -> None:
    """mcp-server-time's get_current_time, guarded, runs once approved; its result relayed."""
    provider.policy = approve_after(0.1)

    async def call() -> Any:
        async with proxied(provider, ["--guard", "get_*"], third_party("mcp-server-time")) as c:
            return await c.call_tool("get_current_time", {"timezone": "Europe/London"})

    result = anyio.run(call)
    assert not result.is_error
    assert "Europe/London" == result.structured_content["timezone"]
    [request] = provider.requests()
    assert ("get_current_time", {"timezone": "Europe/London"}) == (request.tool, request.arguments)


def _cancel_at_provider(provider: LocalProvider, request: ApprovalRequest) -> None:
    provider.cancel(request.id, reason="withdrawn by the operator")


@pytest.mark.parametrize(
    ("policy", "flags", "sentence"),
    [
        pytest.param(
            deny_after(0.1, "not this note"),
            [],
            r"A person denied this call to write_note: not this note\. Do not retry .*",
            id="denied",
        ),
        pytest.param(
            approve_after(0.1, valid_for=0),
            [],
            r"The approval for write_note expired at \S+ before the call could start, so it did "
            r"not run\. Nobody denied it: .*",
            id="expired",
        ),
        pytest.param(
            None,
            ["--timeout", "2s"],
            r"Nobody decided on the request before its deadline, so write_note did not run; it "
            r"was not denied\. .*",
            id="no-decision",
        ),
        pytest.param(
            _cancel_at_provider,
            [],
            r"The approval request for write_note was cancelled at the provider, so it did not "
            r"run\. .*",
            id="cancelled",
        ),
    ],
)
def test_a_call_that_is_not_approved_never_reaches_the_child(
    provider: LocalProvider, record: Path, policy: Policy | None, flags: list[str], sentence: str
) -> None:
    """Denied, expired, undecided, cancelled: isError with the honest sentence; never run."""
    provider.policy = policy
    result = _call(provider, record, "write_note", NOTE, *flags)
    assert result.is_error
    assert re.fullmatch(sentence, text_of(result)), text_of(result)
    assert [] == recorded(record)
    assert 1 == len(provider.requests())


def test_an_edited_approval_reaches_the_child_converted(
    provider: LocalProvider, record: Path
) -> None:
    """A reviewer's edits, converted by the inputSchema's types (number: float), reach the child."""

    def approve_edited(provider: LocalProvider, request: ApprovalRequest) -> None:
        provider.approve(request.id, arguments={**request.arguments, "price": 3, "copies": 2})

    provider.policy = approve_edited
    flags = ["--editable", "write_note:price", "--editable", "write_note:copies"]
    result = _call(provider, record, "write_note", NOTE, *flags)
    assert not result.is_error
    [request] = provider.requests()
    assert ["copies", "price"] == sorted(request.editable or ())
    [call] = recorded(record)
    assert {**NOTE, "price": 3.0, "copies": 2} == call["arguments"]
    assert float is type(call["arguments"]["price"])  # sent as 3.0, converted from the edit's 3


def test_an_edit_the_schema_refuses_never_runs(provider: LocalProvider, record: Path) -> None:
    """An edit that does not convert to its type (a string for an integer): the tool never runs."""

    def approve_edited(provider: LocalProvider, request: ApprovalRequest) -> None:
        provider.approve(request.id, arguments={**request.arguments, "copies": "2"})

    provider.policy = approve_edited
    result = _call(provider, record, "write_note", NOTE, "--editable", "write_note:copies")
    assert result.is_error
    assert "the approved edit could not be applied" in text_of(result)
    assert [] == recorded(record)


def test_a_redacted_argument_reaches_the_child_but_not_the_reviewer(
    provider: LocalProvider, record: Path
) -> None:
    """--redact TOOL:ARG: the reviewer sees a keyed digest, the child the real value."""
    provider.policy = approve_after(0.1)
    arguments = {"name": "groceries", "token": "s3cret-value"}
    result = _call(provider, record, "delete_note", arguments, "--redact", "delete_note:token")
    assert not result.is_error
    [request] = provider.requests()
    assert "s3cret-value" not in str(request.arguments)
    assert ["$redacted"] == list(request.arguments["token"])
    assert [{"tool": "delete_note", "arguments": arguments}] == recorded(record)


def test_an_approval_already_claimed_in_the_ledger_never_runs_again(
    provider: LocalProvider, record: Path, tmp_path: Path
) -> None:
    """--ledger PATH: an approval already claimed there is ALREADY_EXECUTED, never run twice."""
    ledger = tmp_path / "ledger.sqlite3"
    elsewhere = ag.Guard(
        base_url=provider.url, credential=provider.credential, ledger=ag.SQLiteLedger(ledger)
    )

    def claimed_then_approved(provider: LocalProvider, request: ApprovalRequest) -> None:
        # Another proxy on the same record already started this approval's call.
        assert elsewhere.ledger.claim(request.id, tool=request.tool, worker="another proxy")
        provider.approve(request.id)

    provider.policy = claimed_then_approved
    result = _call(provider, record, "write_note", NOTE, "--ledger", str(ledger))
    assert result.is_error
    assert "already" in text_of(result)
    assert [] == recorded(record)
    elsewhere.close()


def test_the_ledger_records_the_run(provider: LocalProvider, record: Path, tmp_path: Path) -> None:
    """An approved call through a proxy with --ledger is recorded as finished under its request."""
    ledger = tmp_path / "ledger.sqlite3"
    provider.policy = approve_after(0.1)
    assert not _call(provider, record, "write_note", NOTE, "--ledger", str(ledger)).is_error
    [request] = provider.requests()
    with ag.Guard(
        base_url=provider.url, credential=provider.credential, ledger=ag.SQLiteLedger(ledger)
    ) as reader:
        execution = reader.ledger.get(request.id)
    assert execution is not None
    assert ("write_note", "finished") == (execution.tool, execution.state)


def test_an_editable_argument_the_call_leaves_out_is_not_offered(
    provider: LocalProvider, record: Path
) -> None:
    """--editable of an optional argument the call omits: the request offers only what it sends."""
    provider.policy = approve_after(0.1)
    arguments = {"name": "groceries", "text": "milk"}
    flags = ["--editable", "write_note:copies", "--editable", "write_note:text"]
    result = _call(provider, record, "write_note", arguments, *flags)
    assert not result.is_error, text_of(result)
    [request] = provider.requests()
    assert ["text"] == list(request.editable or ())
    assert [{"tool": "write_note", "arguments": arguments}] == recorded(record)


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param("DELETE_NOTE", id="case"),
        pytest.param("delete_note ", id="trailing-space"),
        pytest.param("\uff44elete_note", id="fullwidth"),
        pytest.param("delete_not\u0435", id="cyrillic-e"),
    ],
)
def test_a_name_the_server_does_not_list_is_never_passed_on_nor_shown(
    provider: LocalProvider, record: Path, variant: str
) -> None:
    """A variant of a listed name (a loose server would run it): no request, never relayed."""
    provider.policy = approve_after(0.1)
    arguments = {"name": "groceries", "token": "s3cret-value"}
    flags = ["--guard", "delete_note", "--redact", "delete_note:token"]

    async def call() -> Any:
        async with proxied(provider, flags, [*RECORDER, str(record)]) as client:
            return await client.call_tool(variant, arguments)

    result = anyio.run(call)
    assert result.is_error
    assert f"does not list a tool named {variant!r}" in text_of(result), text_of(result)
    assert [] == provider.requests()  # nothing sent: the secret never reaches a reviewer
    assert [] == recorded(record)


def test_a_server_that_dies_with_an_approved_call_is_said_to_maybe_have_run(
    provider: LocalProvider, record: Path
) -> None:
    """The child exits mid-call: isError saying the call was passed on and may have run."""
    provider.policy = approve_after(0.1)
    result = _call(provider, record, "write_note", {"name": "n", "text": "crash now"})
    assert result.is_error
    said = text_of(result)
    assert "was approved and passed on" in said and "may have run" in said
    assert 1 == len(recorded(record))
    [request] = provider.requests()
    assert "approved" == request.status


def test_a_guarded_call_after_the_child_died_asks_nobody_and_says_so(
    provider: LocalProvider, record: Path
) -> None:
    """The child is dead: the next guarded call creates no request and is an error at once."""
    provider.policy = approve_after(0.05)

    async def calls() -> Any:
        child = [*RECORDER, str(record)]
        async with proxied(provider, ["--guard", "delete_*"], child) as client:
            # An unguarded call that kills the child (the recorder exits on "crash now"):
            # relayed as it is, the child's broken connection is an MCP error.
            with pytest.raises(MCPError):
                await client.call_tool("write_note", {"name": "n", "text": "crash now"})
            with anyio.fail_after(20):
                return await client.call_tool("delete_note", {"name": "n"})

    after = anyio.run(calls)

    assert after.is_error
    said = text_of(after)
    assert "not running" in said and "did not run" in said, said
    assert [] == provider.requests()
