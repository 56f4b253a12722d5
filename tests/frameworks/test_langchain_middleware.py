"""ApprovalMiddleware in LangChain's create_agent loop, driven by a scripted chat model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.frameworks.langchain_support import ScriptedChatModel
from tests.support.agents import (
    Refunds,
    approve_edited,
    approve_expired,
    cancel_at_provider,
    wait_for_status,
)
from tests.support.frameworks import require_framework

require_framework("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.tools import BaseTool, tool  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard.langchain import EDIT_NOTICE, ApprovalMiddleware  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402

CALL = {"payment_id": "p_1", "amount": 4900}
ASK = {"messages": [{"role": "user", "content": "refund payment p_1"}]}


def _tools(refunds: Refunds) -> list[BaseTool]:
    @tool
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment; amount is in minor units."""
        return refunds.run(payment_id=payment_id, amount=amount)

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        refunds.runs.append({"lookup": order_id})
        return f"order {order_id}"

    return [issue_refund, lookup_order]


def _agent(model: ScriptedChatModel, refunds: Refunds, middleware: ApprovalMiddleware) -> Any:
    return create_agent(model, tools=_tools(refunds), middleware=[middleware])


@pytest.fixture
def refunds() -> Refunds:
    return Refunds()


@pytest.fixture
def model() -> ScriptedChatModel:
    return ScriptedChatModel(tool="issue_refund", args=CALL)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_approve_runs_the_tool_once_as_sent(
    provider: LocalProvider,
    guard: ag.Guard,
    refunds: Refunds,
    model: ScriptedChatModel,
    mode: str,
) -> None:
    """Approve: the tool ran once with the model's arguments; the model read its result."""
    provider.policy = approve_after(0.05)
    agent = _agent(model, refunds, ApprovalMiddleware(guard, interrupt_on={"issue_refund": True}))
    if mode == "invoke":
        agent.invoke(ASK)
    else:
        asyncio.run(agent.ainvoke(ASK))
    assert [CALL] == refunds.runs
    [message] = model.seen
    assert ("refunded 4900 of p_1", "success", "call_1") == (
        message.content,
        message.status,
        message.tool_call_id,
    )
    [request] = provider.requests()
    assert ("issue_refund", CALL) == (request.tool, request.arguments)
    assert ("amount", "payment_id") == request.editable


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_edit_runs_the_tool_with_the_reviewers_arguments(
    provider: LocalProvider,
    guard: ag.Guard,
    refunds: Refunds,
    model: ScriptedChatModel,
    mode: str,
) -> None:
    """Edit: an approval with changed arguments runs the tool once with them, and says so."""
    provider.policy = approve_edited(amount=100)
    config = {"allowed_decisions": ["approve", "edit", "reject"]}
    agent = _agent(model, refunds, ApprovalMiddleware(guard, interrupt_on={"issue_refund": config}))
    if mode == "invoke":
        agent.invoke(ASK)
    else:
        asyncio.run(agent.ainvoke(ASK))
    assert [{"payment_id": "p_1", "amount": 100}] == refunds.runs
    [message] = model.seen
    assert f"{EDIT_NOTICE}\n\nrefunded 100 of p_1" == message.content


def test_an_edit_the_tools_schema_refuses_does_not_run(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds, model: ScriptedChatModel
) -> None:
    """An edit the tool's schema refuses: the tool did not run; the model read why."""
    provider.policy = approve_edited(amount="a lot")
    events: list[Any] = []
    middleware = ApprovalMiddleware(
        guard, interrupt_on={"issue_refund": True}, on_event=events.append
    )
    _agent(model, refunds, middleware).invoke(ASK)
    [not_run] = [event.not_run for event in events if isinstance(event, ag.CallNotRun)]
    assert [] == refunds.runs
    assert [str(not_run)] == [message.content for message in model.seen]
    assert "amount: int_parsing" in not_run.message
    assert "a lot" not in not_run.message


def test_without_edit_nothing_is_editable_and_an_edit_does_not_run(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds, model: ScriptedChatModel
) -> None:
    """allowed_decisions without "edit": no argument is offered, so no edit can be approved."""
    provider.policy = approve_after(0.05)
    config = {"allowed_decisions": ["approve", "reject"]}
    _agent(model, refunds, ApprovalMiddleware(guard, interrupt_on={"issue_refund": config})).invoke(
        ASK
    )
    assert () == provider.requests()[0].editable
    assert [CALL] == refunds.runs


def _denied(provider: LocalProvider) -> None:
    provider.policy = deny_after(0.05, "refunds over 40 GBP need a manager")


def _expired(provider: LocalProvider) -> None:
    provider.policy = approve_expired


def _undecided(provider: LocalProvider) -> None:
    provider.policy = None


def _cancelled(provider: LocalProvider) -> None:
    provider.policy = cancel_at_provider


NOT_RUN = {
    "reject": (_denied, ag.Reason.DENIED),
    "expired": (_expired, ag.Reason.APPROVAL_EXPIRED),
    "no decision": (_undecided, ag.Reason.NOT_OBTAINED),
    "cancelled at the provider": (_cancelled, ag.Reason.CANCELLED),
}


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize(("arrange", "reason"), NOT_RUN.values(), ids=NOT_RUN.keys())
def test_a_call_that_did_not_run_gives_the_model_the_sentence(
    provider: LocalProvider,
    short_guard: ag.Guard,
    refunds: Refunds,
    model: ScriptedChatModel,
    arrange: Any,
    reason: ag.Reason,
    mode: str,
) -> None:
    """Reject, expiry, no decision, cancellation: no run; an error ToolMessage says why."""
    arrange(provider)
    events: list[Any] = []
    middleware = ApprovalMiddleware(
        short_guard, interrupt_on={"issue_refund": True}, on_event=events.append
    )
    agent = _agent(model, refunds, middleware)
    if mode == "invoke":
        agent.invoke(ASK)
    else:
        asyncio.run(agent.ainvoke(ASK))
    [not_run] = [event.not_run for event in events if isinstance(event, ag.CallNotRun)]
    assert reason == not_run.reason
    assert [] == refunds.runs
    [message] = model.seen
    assert (str(not_run), "error", "call_1") == (
        message.content,
        message.status,
        message.tool_call_id,
    )


def test_cancelling_the_agent_withdraws_the_request_and_runs_nothing(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds, model: ScriptedChatModel
) -> None:
    """An ainvoke task cancelled while the call waits: the request is withdrawn, no run."""
    agent = _agent(model, refunds, ApprovalMiddleware(guard, interrupt_on={"issue_refund": True}))

    async def main() -> str:
        task = asyncio.create_task(agent.ainvoke(ASK))
        request = await asyncio.to_thread(provider.next_request)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return request.id

    request_id = asyncio.run(main())
    assert "cancelled" == wait_for_status(provider, request_id, "cancelled")
    assert [] == refunds.runs
    assert [] == model.seen


def test_a_tool_not_reviewed_runs_without_a_request(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds
) -> None:
    """A tool left out of interrupt_on (or set False) runs at once; nothing is sent."""
    model = ScriptedChatModel(tool="lookup_order", args={"order_id": "o_9"})
    middleware = ApprovalMiddleware(
        guard, interrupt_on={"issue_refund": True, "lookup_order": False}
    )
    _agent(model, refunds, middleware).invoke(ASK)
    assert [{"lookup": "o_9"}] == refunds.runs
    assert [] == provider.requests()


@pytest.mark.parametrize(("answer", "asked"), [(False, False), (True, True), ("yes", True)])
def test_when_decides_whether_to_ask(
    provider: LocalProvider,
    guard: ag.Guard,
    refunds: Refunds,
    model: ScriptedChatModel,
    answer: Any,
    asked: bool,
) -> None:
    """when(request) False runs at once; True, or anything not False, asks the provider."""
    provider.policy = approve_after(0.05)
    config = {"allowed_decisions": ["approve", "reject"], "when": lambda request: answer}
    middleware = ApprovalMiddleware(guard, interrupt_on={"issue_refund": config})
    _agent(model, refunds, middleware).invoke(ASK)
    assert [CALL] == refunds.runs
    assert asked == bool(provider.requests())


def test_redacted_arguments_are_hidden_and_not_editable(
    provider: LocalProvider, guard: ag.Guard, refunds: Refunds, model: ScriptedChatModel
) -> None:
    """redact=["payment_id"]: a marker for the reviewer, left out of what may be edited."""
    provider.policy = approve_after(0.05)
    middleware = ApprovalMiddleware(
        guard,
        interrupt_on={"issue_refund": {"allowed_decisions": ["approve", "edit", "reject"]}},
        redact=["payment_id"],
    )
    _agent(model, refunds, middleware).invoke(ASK)
    [request] = provider.requests()
    assert "p_1" not in str(request.arguments)
    assert ("amount",) == request.editable
    assert [CALL] == refunds.runs


@pytest.mark.parametrize(
    ("interrupt_on", "options", "message"),
    [
        ({"issue_refund": {"allowed_decisions": ["approve", "respond", "reject"]}}, {}, "respond"),
        ({"issue_refund": {"allowed_decisions": ["approve"]}}, {}, "'reject'"),
        ({"issue_refund": {"allowed_decisions": ["edit", "reject"]}}, {}, "'approve'"),
        ({"issue_refund": {}}, {}, "needs allowed_decisions"),
        ({"issue_refund": {"allowed_decisions": "approve"}}, {}, "needs allowed_decisions"),
        (
            {"issue_refund": {"allowed_decisions": ["approve", "reject"], "description": "x"}},
            {},
            "description",
        ),
        ({"issue_refund": "yes"}, {}, "True, False or a config dict"),
        ({"issue_refund": True}, {"timeout": "forever"}, "malformed duration"),
        ({"issue_refund": True}, {"editable": ["amount"]}, "editable"),
        ({"issue_refund": True}, {"when": lambda args: True}, "when"),
        (["issue_refund"], {}, "must map tool names"),
    ],
)
def test_a_bad_config_raises_when_the_middleware_is_made(
    guard: ag.Guard, interrupt_on: Any, options: dict[str, Any], message: str
) -> None:
    """A decision a provider cannot make, a bad entry or option: ConfigurationError at once."""
    with pytest.raises(ag.ConfigurationError, match=message):
        ApprovalMiddleware(guard, interrupt_on=interrupt_on, **options)
