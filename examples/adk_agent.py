"""A Google ADK agent whose refund tool waits for a person: ``guarded_tool``.

``approval_guard.adk.guarded_tool(fn, guard)`` is a ``FunctionTool`` whose every
call is an approval request; the model sees the function's own declaration, and
ADK's ``ToolContext`` is never sent for review. A call that did not run answers
``{"error": <one sentence>, "reason": ...}``, which the model reads.

Runs without a model key or a provider of your own: the agent's model is a
scripted ``BaseLlm`` that asks for one refund and then repeats what the tool
answered, ADK's ``InMemoryRunner`` drives the loop, and a local provider approves
(then denies) each request a moment after it appears::

    pip install 'approval-guard[adk]'
    python examples/adk_agent.py
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools import ToolContext
from google.genai import types

import approval_guard as ag
from approval_guard.adk import guarded_tool
from approval_guard.testing import LocalProvider, approve_after, deny_after


def issue_refund(payment_id: str, amount: int, tool_context: ToolContext) -> dict[str, Any]:
    """Refund part of a payment; amount is in minor units (4900 is 49.00 GBP)."""
    agent = tool_context.agent_name
    return {"result": f"refunded {amount} of {payment_id} for {agent}"}


class OneRefund(BaseLlm):
    """A stand-in model: call issue_refund with ``args``, then say what came back."""

    args: dict[str, Any]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answers = [
            part.function_response.response or {}
            for content in llm_request.contents
            for part in content.parts or ()
            if part.function_response is not None
        ]
        if answers:
            said = answers[-1].get("result") or answers[-1].get("error")
            part = types.Part(text=str(said))
        else:
            part = types.Part(function_call=types.FunctionCall(name="issue_refund", args=self.args))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


async def ask(guard: ag.Guard, **args: Any) -> str:
    """One user turn through ADK's runner; the model's last words."""
    agent = LlmAgent(
        name="support_bot",
        model=OneRefund(model="scripted", args=args),
        tools=[guarded_tool(issue_refund, guard, timeout="30m")],
    )
    runner = InMemoryRunner(agent=agent, app_name="refunds")
    session = await runner.session_service.create_session(app_name="refunds", user_id="alice")
    last = ""
    message = types.Content(role="user", parts=[types.Part(text="please refund me")])
    async for event in runner.run_async(
        user_id="alice", session_id=session.id, new_message=message
    ):
        for part in event.content.parts or () if event.content else ():
            last = part.text or last
    return last


def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        print(f"approved: {asyncio.run(ask(guard, payment_id='payment_123', amount=4900))}")
        print(f"reviewer saw: {provider.requests()[0].arguments}")
        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        print(f"denied: {asyncio.run(ask(guard, payment_id='payment_456', amount=9900))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
