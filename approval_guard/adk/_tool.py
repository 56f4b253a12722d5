"""``guarded_tool``: an ADK ``FunctionTool`` whose function waits for approval on every call."""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from approval_guard._call.outcome import NotRun
from approval_guard._options.inject import injected_by_name
from approval_guard._options.options import ApprovalOptions
from approval_guard.exceptions import ConfigurationError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from approval_guard._guard import Guard

#: Parameters ADK fills in by name (left out when unannotated or unresolvable).
ADK_INJECTED_NAMES = ("tool_context", "input_stream")


def adk_tools() -> Any:
    """``google.adk.tools``, or an ImportError that says which extra brings it."""
    try:
        return importlib.import_module("google.adk.tools")
    except ImportError as exc:
        raise ImportError(
            "approval_guard.adk needs Google ADK: pip install 'approval-guard[adk]'"
        ) from exc


def not_run_response(not_run: NotRun) -> dict[str, Any]:
    """The function response of a call that did not run: ADK's ``{"error": ...}`` shape.

    ``error`` is the ``NotRun``'s sentence (what the model reads); ``reason`` its
    stable code.

    Args:
        not_run: The call that did not run.
    """
    return {"error": str(not_run), "reason": not_run.reason.value}


def guarded_tool(
    tool: Callable[..., Any] | Any,
    guard: Guard,
    /,
    *,
    on_not_run: Callable[[NotRun], Any] = not_run_response,
    **options: Unpack[ApprovalOptions],
) -> Any:
    """A ``FunctionTool`` over ``tool`` (a function or a ``FunctionTool``), guarded by ``guard``.

    ::

        refund = guarded_tool(issue_refund, guard, timeout="30m", editable=("amount",))
        agent = LlmAgent(name="support", model=..., tools=[refund])

    The model sees the same declaration as the unguarded tool. A ``ToolContext``
    parameter (annotated, or named ``tool_context`` as ADK allows, its annotation
    absent or one that cannot be resolved) is ADK's, not
    the model's: never sent for approval. A plain (sync) function waits for its
    approval on the event loop without blocking it, then runs in a worker
    thread (``asyncio.to_thread``). A call that did not run returns
    ``on_not_run(not_run)`` (default :func:`not_run_response`). Bad options raise
    ``ConfigurationError`` here; ADK is imported here.

    Args:
        tool: A function, or ADK's ``FunctionTool`` over one.
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        on_not_run: Made from the :class:`~approval_guard.NotRun` of a call that did not run, and
            returned in its place. Default: :func:`not_run_response`.
        **options: ``requires_approval``'s options (``timeout``, ``redact``, ``editable``,
            ``messages``, ...), checked now.
    """
    tools = adk_tools()
    require_confirmation: Any = False
    if isinstance(tool, tools.FunctionTool):
        fn = tool.func
        require_confirmation = getattr(tool, "_require_confirmation", False)
    elif callable(tool) and not isinstance(tool, tools.BaseTool):
        fn = tool
    else:
        raise ConfigurationError(
            f"guarded_tool takes a function or a FunctionTool, not {type(tool).__name__}"
        )
    if getattr(fn, "__approval_guard__", None) is not None:
        raise ConfigurationError(f"{fn.__name__} is already guarded")
    # ADK fills these in by name: unannotated, or annotated with what cannot be
    # resolved (ToolContext imported inside a factory), they are ADK's, not the model's.
    by_name = injected_by_name(fn, inspect.signature(fn), ADK_INJECTED_NAMES)
    exclude = set(options.get("exclude", ())) | by_name
    if exclude:
        options = {**options, "exclude": tuple(sorted(exclude))}
    target = fn if inspect.iscoroutinefunction(fn) else _in_a_thread(fn)
    guarded = guard.requires_approval(on_not_run=on_not_run, **options)(target)
    return tools.FunctionTool(guarded, require_confirmation=require_confirmation)


def _in_a_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a coroutine function that runs it in a worker thread.

    ADK calls a plain function on its event loop: a guarded one would hold the
    loop (every other session) for the whole approval wait. As a coroutine, the
    wait is the async driver's, on the loop without blocking it, and the
    function itself runs in a thread, as ADK's own threaded runner would run it.
    """

    @functools.wraps(fn)
    async def in_a_thread(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    return in_a_thread
