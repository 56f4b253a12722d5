"""``before_tool_callback``: an ADK agent's before-tool hook that asks a person first.

ADK awaits ``before_tool_callback(tool=, args=, tool_context=)`` right before a
tool runs: a dict it returns is used as the tool's response and the tool is
skipped; ``None`` lets the tool run with ``args``, the very dict the callback
was given (ADK passes the same object on to the tool). So the guarded call's
body, run by the core after it claimed the execution record and checked the
expiry last, writes the approved (possibly edited) values into ``args`` and
returns ``None``; any other outcome returns :func:`not_run_response`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Literal

from approval_guard._harness import harness_call
from approval_guard._input import InputGuard, check_tools
from approval_guard._options.options import ApprovalOptions
from approval_guard._options.spec import check_key
from approval_guard.adk._tool import adk_tools, not_run_response
from approval_guard.exceptions import ConfigurationError

if TYPE_CHECKING:
    from approval_guard._guard import Guard

#: ``when(tool_name, args)``: ask only when it returns True.
When = Callable[[str, Mapping[str, Any]], Any]
BeforeTool = Callable[..., Coroutine[Any, Any, dict[str, Any] | None]]


def before_tool_callback(
    guard: Guard,
    *,
    tools: Mapping[str, bool | ApprovalOptions],
    when: When | None = None,
    unlisted: Literal["allow", "deny"] = "allow",
) -> BeforeTool:
    """A ``before_tool_callback`` that asks a person before each tool in ``tools`` runs.

    ::

        agent = LlmAgent(
            name="support", model=..., tools=[issue_refund],
            before_tool_callback=approval_guard.adk.before_tool_callback(
                guard, tools={"issue_refund": {"timeout": "30m", "editable": ("amount",)}},
            ),
        )

    ``tools`` maps a tool's name to ``True`` or ``requires_approval`` options (not
    ``exclude``); the request's arguments are the model's ``args``, and an edit
    must convert exactly to the JSON type of the value sent (the tool's own ADK
    validation then converts it to the function's types). ``when(tool_name,
    args)`` and ``unlisted`` are as in ``approval_guard.claude.can_use_tool``.
    Bad options raise ``ConfigurationError`` here.

    Args:
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        tools: Each guarded tool's name -> ``True`` or its ``requires_approval`` options (not
            ``exclude``).
        when: ``when(tool_name, arguments)``: ask only when it returns True (raising or a non-bool
            means ask); None: always ask.
        unlisted: ``"allow"``: a tool not in ``tools`` runs unasked; ``"deny"``: it is refused.
    """
    checked = check_tools(tools)
    if when is not None and not callable(when):
        raise ConfigurationError("when must be a callable taking (tool_name, args)")
    if unlisted not in ("allow", "deny"):
        raise ConfigurationError(f'unlisted must be "allow" or "deny", not {unlisted!r}')
    adk_tools()
    guards: dict[str, InputGuard[Any]] = {}
    for name, options in checked.items():
        if when is not None:
            if "when" in options:
                raise ConfigurationError(
                    f"tools[{name!r}] has its own when, and before_tool_callback was given "
                    "one too; give one of them"
                )
            options = {**options, "when": _for_tool(when, name)}
        guards[name] = InputGuard(guard, name, options=options, on_not_run=not_run_response)

    async def callback(tool: Any, args: dict[str, Any], tool_context: Any) -> dict[str, Any] | None:
        name = getattr(tool, "name", None)
        entry = guards.get(name) if isinstance(name, str) else None
        if entry is None:
            if unlisted == "allow":
                return None
            return {
                "error": f"{name} is not among the tools this agent may use, so it did not run "
                "and nobody was asked.",
                "reason": "not_listed",
            }

        async def run(approved: dict[str, Any]) -> None:
            # The core's invoke: after the claim and the expiry check. ADK runs the tool
            # with this same dict.
            args.update(approved)

        key = _idempotency_key(getattr(tool_context, "function_call_id", None))
        with harness_call(idempotency_key=key):
            answer = await entry.acall(dict(args), run)
        if answer is None:
            return None
        if isinstance(answer, dict):
            return answer
        return {"error": f"{entry.name} did not run: no approval could be confirmed."}

    return callback


def _for_tool(when: When, name: str) -> Callable[[Mapping[str, Any]], Any]:
    def for_tool(arguments: Mapping[str, Any]) -> Any:
        return when(name, arguments)

    return for_tool


def _idempotency_key(call_id: object) -> str | None:
    """``adk:<function_call_id>`` when it makes a valid key; else none."""
    if not isinstance(call_id, str) or not call_id:
        return None
    try:
        return check_key(f"adk:{call_id}")
    except ConfigurationError:
        return None
