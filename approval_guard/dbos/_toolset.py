"""``durable_toolset(toolset)``: a Pydantic AI toolset whose tool calls are durable DBOS steps.

Pydantic AI's DBOS agent (``pydantic_ai.durable_exec.dbos.DBOSAgent``) runs
function tools inline in the workflow. Wrapped here, each call of a listed tool
goes through :func:`~approval_guard.dbos.durable`: a DBOS step whose guarded call
takes its idempotency key from the workflow, so a recovered agent run adopts the
same approval request and runs the tool at most once. Wrap a
``approval_guard.pydantic_ai.guarded(...)`` toolset, or a toolset of
``@guard.requires_approval`` function tools.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from approval_guard.dbos._step import durable
from approval_guard.exceptions import ConfigurationError


@dataclass
class DurableToolset(WrapperToolset[AgentDepsT]):
    """A toolset whose tool calls are durable DBOS steps (made by :func:`durable_toolset`)."""

    #: The tools whose calls are steps; None: every tool of the toolset.
    tools: frozenset[str] | None = field(default=None, kw_only=True)

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        wrapped = self.wrapped
        if self.tools is not None and name not in self.tools:
            return await wrapped.call_tool(name, tool_args, ctx, tool)

        async def call() -> Any:
            return await wrapped.call_tool(name, tool_args, ctx, tool)

        step: Callable[[], Awaitable[Any]] = durable(call, name=f"approval_guard:{name}")
        return await step()


def durable_toolset(
    toolset: AbstractToolset[AgentDepsT], *, tools: Collection[str] | None = None
) -> DurableToolset[AgentDepsT]:
    """``toolset`` with each call of its tools (or of ``tools`` only) a durable DBOS step.

    ::

        toolset = durable_toolset(guarded(FunctionToolset([issue_refund]), guard,
                                          tools=["issue_refund"]))
        agent = DBOSAgent(Agent(model, toolsets=[toolset], name="refunds"))

    ``toolset``: any Pydantic AI toolset whose guarded calls should survive a
    crash. ``tools``: the names of the tools to run as steps (default: all).
    Outside a DBOS workflow the calls are made as they are.
    """
    if not isinstance(toolset, AbstractToolset):
        raise ConfigurationError(f"toolset must be a Pydantic AI toolset, not {toolset!r}")
    if isinstance(tools, str):
        raise ConfigurationError("tools must be a collection of names, not a string")
    return DurableToolset(toolset, tools=None if tools is None else frozenset(tools))
