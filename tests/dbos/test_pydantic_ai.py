"""Pydantic AI's DBOS durability with guarded tools: the workflow's key, the example's recovery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.frameworks import require_framework

require_framework("dbos")
require_framework("pydantic_ai")

from dbos import DBOS, SetWorkflowID  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.durable_exec.dbos import DBOSDurability  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard.dbos import DurableGuard, durable  # noqa: E402
from approval_guard.pydantic_ai import guarded  # noqa: E402
from approval_guard.testing import approve_after  # noqa: E402
from tests.support.durable import sent_keys  # noqa: E402
from tests.support.paths import REPO  # noqa: E402

RUNS: list[str] = []


def issue_refund(payment_id: str, amount: int) -> str:
    """Refund part of a payment."""
    RUNS.append(payment_id)
    return f"refunded {amount} of {payment_id}"


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls issue_refund once, then repeats what it returned."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(str(part.content))])
    args = {"payment_id": "payment_123", "amount": 4900}
    return ModelResponse(parts=[ToolCallPart("issue_refund", args)])


@pytest.fixture
def guard(file_provider: Any, tmp_path: Path) -> Any:
    made = DurableGuard(
        base_url=file_provider.url,
        credential=file_provider.credential,
        ledger=ag.SQLiteLedger(tmp_path / "executions.sqlite"),
    )
    file_provider.policy = approve_after(0)
    RUNS.clear()
    yield made
    made.close()


#: The agent of the running test (a workflow's inputs must be serializable).
AGENTS: dict[str, Agent[Any, str]] = {}


@DBOS.workflow(name="ag_test_agent_run")
async def agent_run(prompt: str) -> str:
    return (await AGENTS["agent"].run(prompt)).output


def _run_in_workflow(agent: Agent[Any, str], workflow_id: str) -> str:
    AGENTS["agent"] = agent
    try:
        with SetWorkflowID(workflow_id):
            handle = DBOS.start_workflow(agent_run, "refund it")
        return str(handle.get_result())
    finally:
        AGENTS.clear()


def test_a_guarded_toolset_in_a_dbos_agent_sends_the_workflows_key(
    guard: ag.Guard, file_provider: Any, dbos_app: str
) -> None:
    """guarded(toolset, DurableGuard(...)): the call is a step keyed by the agent's workflow."""
    toolset = guarded(FunctionToolset([issue_refund]), guard, tools=["issue_refund"])
    agent = Agent(
        FunctionModel(_model),
        name="ag_toolset_agent",
        toolsets=[toolset],
        capabilities=[DBOSDurability()],
    )
    assert _run_in_workflow(agent, "agent-wf-1") == "refunded 4900 of payment_123"
    (key,) = sent_keys(file_provider.db)
    assert key.startswith("dbos:agent-wf-1:")
    assert RUNS == ["payment_123"]


def test_a_durable_guarded_function_tool_in_a_dbos_agent_sends_the_workflows_key(
    file_provider: Any, dbos_app: str, tmp_path: Path
) -> None:
    """@durable over a plain Guard's @requires_approval, as a function tool: the same key scheme."""
    file_provider.policy = approve_after(0)
    plain = ag.Guard(
        base_url=file_provider.url,
        credential=file_provider.credential,
        ledger=ag.SQLiteLedger(tmp_path / "plain.sqlite"),
    )
    tool = durable(plain.requires_approval(on_not_run=str)(issue_refund))
    agent = Agent(
        FunctionModel(_model),
        name="ag_function_agent",
        tools=[tool],
        capabilities=[DBOSDurability()],
    )
    try:
        assert _run_in_workflow(agent, "agent-wf-2") == "refunded 4900 of payment_123"
    finally:
        plain.close()
    (key,) = sent_keys(file_provider.db)
    assert key.startswith("dbos:agent-wf-2:")


@pytest.mark.slow
def test_the_dbos_agent_example_survives_a_kill_mid_wait() -> None:
    """examples/dbos_agent.py: killed while waiting, recovered, one request, the tool ran once."""
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "dbos_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "killed the agent while it waited for approval of issue_refund",
        "recovered and approved: refunded 4900 of payment_123",
        "requests the reviewer saw: 1; the tool ran: 1",
    ]


def test_outside_a_workflow_a_durable_guards_toolset_calls_as_it_is(guard: ag.Guard) -> None:
    """A plain Agent with the same toolset: the guarded call as today, a random key."""
    toolset = guarded(FunctionToolset([issue_refund]), guard, tools=["issue_refund"])
    agent = Agent(FunctionModel(_model), toolsets=[toolset])
    assert agent.run_sync("refund it").output == "refunded 4900 of payment_123"
    assert RUNS == ["payment_123"]
