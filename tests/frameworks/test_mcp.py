"""A guarded function as an MCP tool (mcp 2.x ``MCPServer``), called by an in-process MCP client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.frameworks import require_framework

require_framework("mcp")

from mcp import Client  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.types import CallToolResult, TextContent  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402

DENIED_ADVICE = "Do not retry the same call: tell the user it was denied, and ask how to go on."
DENIED_TEXT = f"A person denied this call to issue_refund: not this customer. {DENIED_ADVICE}"


def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
    """Refund part of a payment; amount is in minor units."""
    return {"refunded": amount, "payment_id": payment_id, "currency": currency}


async def issue_refund_async(payment_id: str, amount: int, currency: str = "GBP") -> str:
    """Refund part of a payment; amount is in minor units."""
    await asyncio.sleep(0)
    return f"refunded {amount} {currency} of {payment_id}"


TOOLS = {"sync": issue_refund, "async": issue_refund_async}


def _server(fn: Callable[..., Any], **options: Any) -> MCPServer:
    server = MCPServer("refunds")
    server.tool(**options)(fn)
    return server


def _call(server: MCPServer, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """tools/call through a real MCP client session, in-process."""

    async def call() -> CallToolResult:
        async with Client(server) as client:
            return await client.call_tool(name, arguments)

    return asyncio.run(call())


def _text(result: CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


def _listed(server: MCPServer) -> dict[str, Any]:
    async def listed() -> dict[str, Any]:
        async with Client(server) as client:
            [tool] = (await client.list_tools()).tools
            return {"input": tool.input_schema, "output": tool.output_schema}

    return asyncio.run(listed())


@pytest.mark.parametrize("fn", TOOLS.values(), ids=TOOLS.keys())
def test_input_schema_equals_the_unguarded_one(guard: ag.Guard, fn: Any) -> None:
    """tools/list shows the guarded tool with the unguarded function's schemas."""
    guarded = guard.requires_approval(timeout="1m")(fn)
    assert _listed(_server(fn)) == _listed(_server(guarded))
    assert _listed(_server(fn, structured_output=False)) == _listed(
        _server(guarded, structured_output=False)
    )


@pytest.mark.parametrize("fn", TOOLS.values(), ids=TOOLS.keys())
def test_call_tool_runs_after_approval(provider: LocalProvider, guard: ag.Guard, fn: Any) -> None:
    """tools/call waits for approval, runs the tool and returns its result."""
    provider.policy = approve_after(0.05)
    server = _server(guard.requires_approval(timeout="1m")(fn), structured_output=False)
    result = _call(server, fn.__name__, {"payment_id": "p_1", "amount": 4900})
    assert not result.is_error
    expected = fn("p_1", 4900) if fn is issue_refund else "refunded 4900 GBP of p_1"
    assert expected == (json.loads(_text(result)) if fn is issue_refund else _text(result))
    [request] = provider.requests()
    assert {"payment_id": "p_1", "amount": 4900, "currency": "GBP"} == request.arguments


@pytest.mark.parametrize("fn", TOOLS.values(), ids=TOOLS.keys())
def test_not_run_comes_back_as_text_content(
    provider: LocalProvider, guard: ag.Guard, fn: Any
) -> None:
    """With structured_output=False a NotRun is text content carrying its message, not an error."""
    provider.policy = deny_after(0.05, "not this customer")
    server = _server(guard.requires_approval(timeout="1m")(fn), structured_output=False)
    result = _call(server, fn.__name__, {"payment_id": "p_1", "amount": 4900})
    assert not result.is_error
    # MCP sends every non-str return value as JSON text: here, the message as a JSON string.
    expected = f"A person denied this call to {fn.__name__}: not this customer. {DENIED_ADVICE}"
    assert expected == json.loads(_text(result))


def test_structured_output_cannot_carry_a_not_run(provider: LocalProvider, guard: ag.Guard) -> None:
    """Why the docs say structured_output=False: an output schema turns NotRun into an error."""
    provider.policy = deny_after(0.05, "not this customer")
    server = _server(guard.requires_approval(timeout="1m")(issue_refund_async))
    assert _listed(server)["output"] is not None  # `-> str` is structured by default
    result = _call(server, "issue_refund_async", {"payment_id": "p_1", "amount": 1})
    assert result.is_error
    assert "not this customer" not in _text(result)


def test_context_is_not_sent_for_approval(provider: LocalProvider, guard: ag.Guard) -> None:
    """MCPServer's Context reaches the tool and is not sent to the reviewer."""
    provider.policy = approve_after(0.05)
    server = MCPServer("refunds")

    @server.tool(structured_output=False)
    @guard.requires_approval(timeout="1m")
    async def refund(payment_id: str, ctx: Context) -> str:
        """Refund a payment."""
        assert ctx.request_id  # a live request's context, passed by MCPServer
        return f"refunded {payment_id} on {ctx.mcp_server.name}"

    assert ["payment_id"] == list(_listed(server)["input"]["properties"])
    result = _call(server, "refund", {"payment_id": "p_1"})
    assert "refunded p_1 on refunds" == _text(result)
    [request] = provider.requests()
    assert {"payment_id": "p_1"} == request.arguments


def test_on_not_run_str_gives_plain_text(provider: LocalProvider, guard: ag.Guard) -> None:
    """With on_not_run=str the model reads the sentence itself, not a JSON string."""
    provider.policy = deny_after(0.05, "not this customer")
    guarded = guard.requires_approval(timeout="1m", on_not_run=str)(issue_refund)
    server = _server(guarded, structured_output=False)
    result = _call(server, "issue_refund", {"payment_id": "p_1", "amount": 4900})
    assert not result.is_error
    assert DENIED_TEXT == _text(result)


def _as_tool_result(not_run: ag.NotRun) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=str(not_run))], is_error=True)


def test_structured_tools_carry_a_not_run_as_a_tool_error_with_its_message(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """Structured output kept: on_not_run returns MCP's own result, marked as not run."""
    guarded = guard.requires_approval(timeout="1m", on_not_run=_as_tool_result)(issue_refund)
    server = _server(guarded)
    assert _listed(server)["output"] is not None
    provider.policy = deny_after(0.05, "not this customer")
    denied = _call(server, "issue_refund", {"payment_id": "p_1", "amount": 1})
    assert denied.is_error
    assert DENIED_TEXT == _text(denied)
    provider.policy = approve_after(0.05)
    ran = _call(server, "issue_refund", {"payment_id": "p_1", "amount": 1})
    assert not ran.is_error
    assert {"refunded": 1, "payment_id": "p_1", "currency": "GBP"} == ran.structured_content
