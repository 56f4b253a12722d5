"""A scripted LangChain chat model: calls one tool, records the ToolMessage it read back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.support.frameworks import require_framework

require_framework("langchain")

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402


class ScriptedChatModel(BaseChatModel):
    """Asks for ``tool`` with ``args`` (id ``call_1``); after a ToolMessage, says ``done``.

    ``seen`` holds every ToolMessage it was given back, as a model reads them.
    """

    tool: str
    args: dict[str, Any]
    seen: list[ToolMessage] = []

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            self.seen.append(last)
            reply = AIMessage(content="done")
        else:
            call = {"name": self.tool, "args": dict(self.args), "id": "call_1", "type": "tool_call"}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        # The script names its tool itself; binding changes nothing.
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted"
