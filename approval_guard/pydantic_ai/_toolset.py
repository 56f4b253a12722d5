"""``guarded(toolset, guard, tools=...)``: a toolset whose listed tools wait for approval.

Each call of a listed tool is one guarded call of the core (the same rules as
``@guard.requires_approval``: the request, the wait, the expiry checked right
before the call, the execution record, redaction, honest ``NotRun``s). Pydantic
AI has validated the model's arguments against the tool's schema already; those
are what the reviewer sees. A reviewer's edit is validated again by the tool's
own validator before anything is claimed, so an edit the schema refuses never
runs. A call that did not run returns ``on_not_run(not_run)`` as the tool's
result (the sentence, by default), or raises what it raises (``ModelRetry``
with :func:`~approval_guard.pydantic_ai.as_model_retry`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset

from approval_guard._call.outcome import NotRun
from approval_guard._codec.serialize import dumps, to_json_value
from approval_guard._guard import Guard
from approval_guard._harness import in_batch
from approval_guard._options.converters import EditError
from approval_guard._options.schema_check import refused_edit
from approval_guard._options.shape import from_names
from approval_guard._options.spec import build_spec
from approval_guard._options.tool_table import ToolOptions, schema_arguments, tool_options
from approval_guard.exceptions import ConfigurationError


@dataclass
class GuardedToolset(WrapperToolset[AgentDepsT]):
    """A toolset whose listed tools wait for a person's approval (make it with :func:`guarded`).

    Attributes:
        wrapped: The toolset whose tools are guarded.
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        tool_options: Each guarded tool's name -> its options (checked when the toolset is made).
        on_not_run: Made from the :class:`~approval_guard.NotRun` of a call that did not run, and
            returned in its place. Default: ``str``.
        batch: Send each call's run step as API 1.3's ``batch`` (see :func:`guarded`).
    """

    guard: Guard = field(kw_only=True)
    #: Each guarded tool's name -> its options (checked when the toolset is made).
    tool_options: Mapping[str, Mapping[str, Any]] = field(kw_only=True)
    on_not_run: Callable[[NotRun], Any] = field(default=str, kw_only=True)
    batch: bool = field(default=True, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.guard, Guard):
            raise ConfigurationError(f"guard must be an approval_guard.Guard, not {self.guard!r}")
        if not callable(self.on_not_run):
            raise ConfigurationError("on_not_run must be a callable taking a NotRun, such as str")
        if not isinstance(self.batch, bool):
            raise ConfigurationError("batch must be True or False")
        if isinstance(self.wrapped, FunctionToolset):
            # Its tools are known now: a misspelt name would leave the real tool unguarded.
            for name, options in self.tool_options.items():
                tool = self.wrapped.tools.get(name)
                if tool is None:
                    raise ConfigurationError(_missing(name, sorted(self.wrapped.tools)))
                _check_names(name, schema_arguments(tool.function_schema.json_schema), options)

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """The wrapped toolset's tools, each guarded one checked against its options.

        Args:
            ctx: Pydantic AI's run context.
        """
        tools = await self.wrapped.get_tools(ctx)
        for name, options in self.tool_options.items():
            tool = tools.get(name)
            if tool is None:
                raise ConfigurationError(_missing(name, sorted(tools)))
            _check_names(name, schema_arguments(tool.tool_def.parameters_json_schema), options)
        return tools

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        options = self.tool_options.get(name)
        if options is None:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        wrapped = self.wrapped

        async def run(**arguments: Any) -> Any:
            return await wrapped.call_tool(name, arguments, ctx, tool)

        declared = schema_arguments(tool.tool_def.parameters_json_schema) | set(tool_args)
        spec = build_spec(
            from_names(run, options.get("tool") or name, declared),
            options=options,
            on_not_run=self.on_not_run,
            check_edit=_revalidate(tool_args, ctx, tool),
            name=name,
        )
        with in_batch(turn_id(ctx) if self.batch else None):
            return await self.guard._call_async(spec, (), dict(tool_args))


def turn_id(ctx: RunContext[Any]) -> str | None:
    """The run step (one model response's tool calls) as ``RUN_ID:STEP`` (None: no run id)."""
    run_id, step = getattr(ctx, "run_id", None), getattr(ctx, "run_step", None)
    if not isinstance(run_id, str) or not run_id or type(step) is not int:
        return None
    return f"{run_id}:{step}"


def _revalidate(
    tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
) -> Callable[[dict[str, Any]], Mapping[str, Any]]:
    """The tool's own validator over the call with a reviewer's edits in place."""

    def check(edits: dict[str, Any]) -> Mapping[str, Any]:
        # The edited call as JSON, validated as Pydantic AI validates a model's call.
        merged = {**to_json_value(tool_args), **edits}
        try:
            validated = tool.args_validator.validate_json(
                dumps(merged), context=getattr(ctx, "validation_context", None)
            )
        except Exception as exc:
            raise refused_edit(exc) from None
        if not isinstance(validated, dict):
            raise EditError("its schema did not give the arguments as a dict")
        validator = getattr(tool, "args_validator_func", None)
        if validator is not None:
            try:
                verdict = validator(ctx, **validated)
            except Exception as exc:
                raise EditError(f"its argument validator raised {type(exc).__name__}") from None
            if inspect.isawaitable(verdict):
                close = getattr(verdict, "close", None)
                if callable(close):
                    close()
                # It cannot be awaited before the record is claimed: fail closed.
                raise EditError(
                    "its argument validator is async, so it cannot check an edit in time"
                )
        return validated

    return check


def _check_names(tool: str, declared: frozenset[str], options: Mapping[str, Any]) -> None:
    """The tool's options against its schema's argument names (when it declares any)."""
    if not declared:
        return
    build_spec(
        from_names(_unused, options.get("tool") or tool, declared), options=options, name=tool
    )


async def _unused(**arguments: Any) -> None:
    """Stand-in run of a spec made only to check names."""


def _missing(name: str, offered: list[str]) -> str:
    shown = ", ".join(offered[:20]) or "none"
    return (
        f"tools names {name!r}, which the toolset does not offer (it offers: {shown}); "
        "a misspelt name would leave the real tool unguarded"
    )


def guarded(
    toolset: AbstractToolset[AgentDepsT],
    guard: Guard,
    *,
    tools: Collection[str] | Mapping[str, ToolOptions | bool],
    on_not_run: Callable[[NotRun], Any] = str,
    batch: bool = True,
    **options: Any,
) -> GuardedToolset[AgentDepsT]:
    """``toolset`` with every call of the named ``tools`` waiting for a person's approval.

    ::

        toolset = FunctionToolset([issue_refund, lookup_order])
        agent = Agent(model, toolsets=[
            guarded(toolset, guard, tools={"issue_refund": {"editable": ["amount"]}},
                    timeout="30m"),
        ])

    ``options`` are ``requires_approval``'s (``timeout``, ``tool``, ``exclude``,
    ``when``, ``describe``, ``redact``, ``editable``, ``on_event``, ``messages``), shared by
    every listed tool; a dict in ``tools`` adds or overrides them for one tool.
    ``on_not_run`` makes the tool's result from a ``NotRun`` (``str``: its
    sentence, which the model reads); :func:`as_model_retry` raises
    ``ModelRetry`` instead. A name that the toolset does not offer, or an option
    that does not fit a tool's schema, raises ``ConfigurationError`` (when the
    toolset is made for a ``FunctionToolset``, else when its tools are listed).

    Args:
        toolset: Any Pydantic AI toolset (a ``FunctionToolset``, an MCP server, ...).
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        tools: The tools to guard: names, or each name -> ``True`` or its options.
        on_not_run: Made from the :class:`~approval_guard.NotRun` of a call that did not run, and
            returned in its place. Default: ``str``.
        batch: Send each request's run step, ``"RUN_ID:STEP"``, as API 1.3's ``batch``
            (one model response's tool calls share it), so a reviewer sees them
            together; ``False`` for a provider older than 1.3, which refuses it.
        **options: Options shared by every listed tool.
    """
    if not isinstance(toolset, AbstractToolset):
        raise ConfigurationError(
            f"guarded() wraps a Pydantic AI toolset, not {type(toolset).__name__}"
        )
    return GuardedToolset(
        toolset,
        guard=guard,
        tool_options=tool_options(tools, options),
        on_not_run=on_not_run,
        batch=batch,
    )
