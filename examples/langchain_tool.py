"""A guarded refund tool as a LangChain tool, called the way an agent calls it.

The tool is an ordinary function under ``@tool``; ``requires_approval`` sits
between the two and holds each call until a person decides. LangChain reads the
tool's schema from the function as usual, and a call that did not run comes
back as a ``ToolMessage`` whose content is one sentence the model can act on.

Runs without a language model or a provider of your own: it starts a local
provider whose policy approves (then denies) every request a moment after it
appears, and invokes the tool with a tool call, as an agent executor does::

    pip install 'approval-guard[frameworks]'
    python examples/langchain_tool.py
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after


def build(guard: ag.Guard) -> BaseTool:
    """The refund tool, each call guarded by ``guard``."""

    @tool
    @guard.requires_approval(timeout="30m")
    def issue_refund(payment_id: str, amount: int, config: RunnableConfig) -> str:
        """Refund part of a payment; amount is in minor units (4900 is 49.00 GBP)."""
        # LangChain passes `config` itself: it is recognised by its type, so the
        # reviewer sees only payment_id and amount.
        agent = config.get("metadata", {}).get("agent", "an agent")
        return f"refunded {amount} of {payment_id} for {agent}"

    return issue_refund


def tool_call(call_id: str, **args: Any) -> dict[str, Any]:
    """A tool call as a chat model emits it."""
    return {"type": "tool_call", "id": call_id, "name": "issue_refund", "args": args}


def main() -> int:
    with LocalProvider(policy=approve_after(0.2)) as provider:
        guard = ag.Guard(base_url=provider.url, credential=provider.credential)
        issue_refund = build(guard)
        config: RunnableConfig = {"metadata": {"agent": "support-bot"}}

        message = issue_refund.invoke(
            tool_call("call_1", payment_id="payment_123", amount=4900), config=config
        )
        print(f"approved: {message.content}")
        print(f"reviewer saw: {provider.requests()[0].arguments}")

        provider.policy = deny_after(0.2, "refunds over 40 GBP need a manager")
        message = issue_refund.invoke(
            tool_call("call_2", payment_id="payment_456", amount=9900), config=config
        )
        print(f"denied: {message.content}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
