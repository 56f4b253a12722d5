"""A scripted ADK model: it calls one tool, then reports what the tool's response said.

A ``BaseLlm`` subclass, so ADK's own ``Runner`` drives the agent loop (the
function call, the before-tool callbacks, the tool, the function response
handed back to the model) with no network and no key.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types


class ScriptedModel(BaseLlm):
    """First turn: call ``tool`` with ``args``; next turn: say the function response."""

    tool: str
    args: dict[str, Any]
    #: The function responses the model was given, in order.
    saw: list[dict[str, Any]] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        responses = [
            part.function_response.response
            for content in llm_request.contents
            for part in content.parts or ()
            if part.function_response is not None
        ]
        if not responses:
            call = types.FunctionCall(
                id=f"call_{uuid.uuid4().hex[:8]}", name=self.tool, args=self.args
            )
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )
            return
        self.saw.extend(dict(r or {}) for r in responses)
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=str(responses[-1]))])
        )


async def run_agent(model: ScriptedModel, tools: list[Any], **agent: Any) -> str:
    """One user turn through ADK's InMemoryRunner; the model's final text."""
    root = LlmAgent(name="support", model=model, tools=tools, **agent)
    runner = InMemoryRunner(agent=root, app_name="scripted")
    session = await runner.session_service.create_session(app_name="scripted", user_id="u")
    text = ""
    async for event in runner.run_async(
        user_id="u",
        session_id=session.id,
        new_message=types.Content(role="user", parts=[types.Part(text="refund it")]),
    ):
        for part in (event.content.parts or ()) if event.content else ():
            if part.text:
                text = part.text
    return text
