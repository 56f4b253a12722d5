"""``can_use_tool``: the Claude Agent SDK's permission callback, as an approval request.

The Claude Code CLI asks the SDK, over its control protocol, whether a tool may
run; the SDK awaits ``can_use_tool(tool_name, input, context)`` and sends the
answer back; the CLI then runs the tool itself, with the answer's
``updatedInput``. So the "tool" this module guards is the *permission*: each
listed tool's input becomes an approval request (its fields are the request's
arguments), and the guarded call's body, run by the core after it claimed the
execution record and checked the approval's expiry as its very last step,
returns ``PermissionResultAllow(updated_input=<the approved input>)``. Anything
else is ``PermissionResultDeny(message=<the NotRun's sentence>)``.

``context.tool_use_id`` (the CLI's id for the tool call) is the idempotency key:
a permission asked twice for the same tool call recovers the same request, and
the execution record allows it at most once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Literal

from approval_guard._call.outcome import NotRun
from approval_guard._harness import harness_call
from approval_guard._input import InputGuard, check_tools
from approval_guard._options.options import ApprovalOptions
from approval_guard._options.spec import check_key
from approval_guard.claude._sdk import sdk
from approval_guard.exceptions import ConfigurationError

if TYPE_CHECKING:
    from approval_guard._guard import Guard

log = logging.getLogger("approval_guard")

#: ``when(tool_name, input)``: ask only when it returns True.
When = Callable[[str, Mapping[str, Any]], Any]
#: The callback ``ClaudeAgentOptions(can_use_tool=...)`` takes.
CanUseTool = Callable[[str, dict[str, Any], Any], Coroutine[Any, Any, Any]]


def can_use_tool(
    guard: Guard,
    *,
    tools: Mapping[str, bool | ApprovalOptions],
    when: When | None = None,
    unlisted: Literal["allow", "deny"] = "allow",
) -> CanUseTool:
    """A ``can_use_tool`` callback that asks a person before each tool in ``tools`` runs.

    ::

        options = ClaudeAgentOptions(
            can_use_tool=approval_guard.claude.can_use_tool(
                guard,
                tools={
                    "Bash": {"timeout": "30m", "editable": ("command",)},
                    "mcp__payments__refund": True,
                },
            ),
        )

    - ``tools``: tool name (as the CLI names it: ``"Bash"``, ``"mcp__server__tool"``)
      to ``True`` or a dict of ``requires_approval`` options (``timeout``, ``tool``,
      ``when``, ``redact``, ``editable``, ``messages``, ``on_event``; not ``exclude``).
      The request's arguments are the tool's input fields. An editable field's
      edit must convert exactly to the JSON type of the value sent.
    - ``when``: ``when(tool_name, input)``; ask only if it returns True, else the
      tool is allowed unasked (raising or a non-bool means ask). A tool's own
      ``when`` (given the input) cannot be combined with it.
    - ``unlisted``: what a tool not in ``tools`` gets: ``"allow"`` (default, its
      input unchanged) or ``"deny"`` (with a sentence that names it).

    The callback never raises for a call: anything that keeps a listed tool from
    an approval (a bad input, a provider fault) is a deny with the ``NotRun``'s
    sentence. Bad options raise ``ConfigurationError`` here.

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
        raise ConfigurationError("when must be a callable taking (tool_name, input)")
    if unlisted not in ("allow", "deny"):
        raise ConfigurationError(f'unlisted must be "allow" or "deny", not {unlisted!r}')
    module = sdk()
    allow_type: Any = module.PermissionResultAllow
    deny_type: Any = module.PermissionResultDeny

    def deny(not_run: NotRun) -> Any:
        return deny_type(message=str(not_run))

    guards: dict[str, InputGuard[Any]] = {}
    for name, options in checked.items():
        if when is not None:
            if "when" in options:
                raise ConfigurationError(
                    f"tools[{name!r}] has its own when, and can_use_tool was given one too; "
                    "give one of them"
                )
            options = {**options, "when": _for_tool(when, name)}
        guards[name] = InputGuard(guard, name, options=options, on_not_run=deny)

    async def allow(approved: dict[str, Any]) -> Any:
        # Run by the core as the guarded call's body: after the claim and the expiry check.
        return allow_type(updated_input=approved)

    async def callback(tool_name: str, input: dict[str, Any], context: Any) -> Any:
        entry = guards.get(tool_name)
        if entry is None:
            if unlisted == "allow":
                return allow_type()
            return deny_type(
                message=f"{tool_name} is not among the tools this agent may use, so it did "
                "not run and nobody was asked."
            )
        key = _idempotency_key(getattr(context, "tool_use_id", None))
        with harness_call(idempotency_key=key):
            answer = await entry.acall(input, allow)
        if isinstance(answer, (allow_type, deny_type)):
            return answer
        return deny_type(message=f"{entry.name} did not run: no approval could be confirmed.")

    return callback


def _for_tool(when: When, name: str) -> Callable[[Mapping[str, Any]], Any]:
    def for_tool(arguments: Mapping[str, Any]) -> Any:
        return when(name, arguments)

    return for_tool


def _idempotency_key(tool_use_id: object) -> str | None:
    """``claude:<tool_use_id>`` when it makes a valid key; else none (a fresh request)."""
    if not isinstance(tool_use_id, str):
        return None
    key = f"claude:{tool_use_id}"
    try:
        return check_key(key)
    except ConfigurationError:
        log.warning("the tool_use_id of a permission request is not usable as a key")
        return None
