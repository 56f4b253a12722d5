"""A Pydantic AI agent on DBOS whose refund survives the agent's process being killed mid-wait.

Pydantic AI's ``DBOSDurability`` capability (``pydantic_ai.durable_exec.dbos``)
makes the agent's run, called inside a ``@DBOS.workflow``, durable; with a
``DurableGuard``, each call of the guarded refund tool is a DBOS step whose
approval request is keyed by the workflow's id and the step's position. This script plays the whole
story with real processes: an agent process asks for the refund and waits; it is
SIGKILLed while it waits; a new agent process launches DBOS, which recovers the
workflow; its step adopts the same request (the reviewer sees one); a person
approves; the tool runs once and the agent answers.

Runs without a model key or a provider of your own (Pydantic AI's
``FunctionModel`` plays the model; a local provider stands in for the reviewers;
DBOS keeps its workflows in a SQLite file)::

    pip install 'approval-guard[pydantic-ai,dbos,server]'
    python examples/dbos_agent.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

WORKFLOW = "refund-agent-1"


def issue_refund(payment_id: str, amount: int) -> str:
    """Refund part of a payment; amount is in minor units (4900 is 49.00 GBP)."""
    with open(os.environ["REFUNDS_LOG"], "a") as log:  # one line each time it runs
        log.write(f"{payment_id} {amount}\n")
    return f"refunded {amount} of {payment_id}"


def agent_process(mode: str) -> None:
    """One agent process: start the agent's workflow, or recover it; print its output."""
    from dbos import DBOS, SetWorkflowID
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSDurability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    import approval_guard as ag
    from approval_guard.dbos import DurableGuard
    from approval_guard.pydantic_ai import guarded

    def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """Stands in for a model: "refund 4900 of payment_123" -> issue_refund(...)."""
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(str(part.content))])
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                _, amount, _, payment_id = part.content.split()
                args = {"payment_id": payment_id, "amount": int(amount)}
                return ModelResponse(parts=[ToolCallPart("issue_refund", args)])
        return ModelResponse(parts=[TextPart("I have nothing to do.")])

    state = Path(os.environ["AGENT_STATE"])
    guard = DurableGuard(  # a Guard whose calls are durable steps inside a workflow
        base_url=os.environ["APPROVAL_GUARD_URL"],
        credential=os.environ["APPROVAL_GUARD_CREDENTIAL"],
        ledger=ag.SQLiteLedger(state / "executions.sqlite"),  # did the tool start? (crashes)
    )
    toolset = guarded(FunctionToolset([issue_refund]), guard, tools=["issue_refund"])
    agent = Agent(
        FunctionModel(scripted_model),
        name="refunds",
        toolsets=[toolset],
        capabilities=[DBOSDurability()],
    )

    @DBOS.workflow()
    async def refund_agent(prompt: str) -> str:
        return (await agent.run(prompt)).output

    DBOS(config={"name": "refund-agent", "system_database_url": f"sqlite:///{state}/dbos.sqlite"})
    DBOS.launch()  # recovers the workflows a killed process left pending
    if mode == "start":
        with SetWorkflowID(WORKFLOW):
            handle = DBOS.start_workflow(refund_agent, "refund 4900 of payment_123")
    else:
        handle = DBOS.retrieve_workflow(WORKFLOW)
    print(json.dumps({"output": handle.get_result()}), flush=True)
    DBOS.destroy()


def main() -> int:
    from approval_guard.testing import LocalProvider

    with tempfile.TemporaryDirectory() as state, LocalProvider() as provider:
        env = {
            **os.environ,
            "AGENT_STATE": state,
            "REFUNDS_LOG": str(Path(state) / "refunds.log"),
            "APPROVAL_GUARD_URL": provider.url,
            "APPROVAL_GUARD_CREDENTIAL": provider.credential,
        }

        def agent(mode: str) -> subprocess.Popen[str]:
            return subprocess.Popen(
                [sys.executable, __file__, mode],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )

        first = agent("start")
        request = provider.next_request(timeout=60)
        first.send_signal(signal.SIGKILL)
        first.communicate()
        print(f"killed the agent while it waited for approval of {request.tool}")

        second = agent("recover")
        provider.wait_for_polls(1, timeout=60)  # the recovered step waits on the same request
        provider.approve(request.id)
        out, _ = second.communicate(timeout=60)
        print(f"recovered and approved: {json.loads(out.splitlines()[-1])['output']}")
        runs = Path(env["REFUNDS_LOG"]).read_text().splitlines()
        print(f"requests the reviewer saw: {len(provider.requests())}; the tool ran: {len(runs)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        agent_process(sys.argv[1])
    else:
        raise SystemExit(main())
