"""``guarded``: a CrewAI tool whose every run waits for a person's approval."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from approval_guard._call.outcome import NotRun
from approval_guard._options.options import ApprovalOptions
from approval_guard.exceptions import ConfigurationError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from approval_guard._guard import Guard


def _crewai_tools() -> Any:
    """``crewai.tools.base_tool`` (BaseTool, Tool), or an ImportError naming the extra."""
    try:
        return importlib.import_module("crewai.tools.base_tool")
    except ImportError as exc:
        raise ImportError(
            "approval_guard.crewai needs CrewAI: pip install 'approval-guard[crewai]'"
        ) from exc


def guarded(
    tool: Any,
    guard: Guard,
    /,
    *,
    on_not_run: Callable[[NotRun], Any] = str,
    **options: Unpack[ApprovalOptions],
) -> Any:
    """A copy of the CrewAI ``tool`` whose runs each wait for approval through ``guard``.

    ::

        refund = guarded(issue_refund, guard, timeout="30m", editable=("amount",))
        agent = Agent(role="support", goal="...", backstory="...", tools=[refund])

    ``tool`` is what ``@tool`` made (its function is guarded) or any ``BaseTool``
    (its ``_run`` is). The reviewer sees the tool's name (``tool=`` to change it)
    and the arguments of the function or of ``_run``; the tool's ``args_schema``,
    so what the model sees, is unchanged. A call that did not run returns
    ``on_not_run(not_run)``: by default its sentence, which CrewAI hands the model
    as the tool's output. The original tool is left as it was. Bad options raise
    ``ConfigurationError`` here.

    Args:
        tool: A CrewAI ``@tool`` result or any ``BaseTool``.
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        on_not_run: Made from the :class:`~approval_guard.NotRun` of a call that did not run, and
            returned in its place.
        **options: ``requires_approval``'s options (``timeout``, ``redact``, ``editable``,
            ``messages``, ...), checked now.
    """
    tools = _crewai_tools()
    if not isinstance(tool, tools.BaseTool):
        raise ConfigurationError(
            f"guarded takes a CrewAI tool (a BaseTool or what @tool made), not "
            f"{type(tool).__name__}"
        )
    if options.get("tool") is None:
        options = {**options, "tool": tool.name}
    decorate = guard.requires_approval(on_not_run=on_not_run, **options)
    func = getattr(tool, "func", None)
    if isinstance(tool, tools.Tool) and callable(func):
        if getattr(func, "__approval_guard__", None) is not None:
            raise ConfigurationError(f"{tool.name} is already guarded")
        return tool.model_copy(update={"func": decorate(func)})
    copy = tool.model_copy()
    run = copy._run
    if getattr(run, "__approval_guard__", None) is not None:
        raise ConfigurationError(f"{tool.name} is already guarded")
    # The instance's own _run, bound to the copy: BaseTool.run and
    # to_structured_tool() both call self._run.
    object.__setattr__(copy, "_run", decorate(run))
    return copy
