"""A scripted Pydantic AI model (FunctionModel): calls one tool, records what it read back."""

from __future__ import annotations

from typing import Any

import attrs

from tests.support.frameworks import require_framework

require_framework("pydantic_ai")

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402


@attrs.define
class Script:
    """Calls ``tool`` with ``args`` once, then records what came back and stops."""

    tool: str
    args: dict[str, Any]
    #: What the model read back as the tool's result.
    seen: list[Any] = attrs.field(factory=list)
    #: What it read back as a retry prompt (a ModelRetry).
    retries: list[Any] = attrs.field(factory=list)

    def model(self) -> FunctionModel:
        return FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                # Pydantic AI 2 sends a ModelRetry back as a return whose outcome is "retried".
                retried = getattr(part, "outcome", None) == "retried"
                (self.retries if retried else self.seen).append(part.content)
                return ModelResponse(parts=[TextPart("done")])
            if isinstance(part, RetryPromptPart):
                self.retries.append(part.content)
                return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[ToolCallPart(self.tool, dict(self.args), tool_call_id="call_1")]
        )
