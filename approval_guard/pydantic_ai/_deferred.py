"""``resolve_deferred``: Pydantic AI's deferred approvals answered by the approval provider.

With ``requires_approval=True`` (or ``ApprovalRequired``), a run ends with
``DeferredToolRequests``; the next run takes ``DeferredToolResults``. Here each
approval request becomes one guarded call of the core, whose "tool" is the
answer itself: once a person approves, the approval is checked (its expiry,
right before the answer is made; the execution record, so one approval gives
one ``ToolApproved``), and a reviewer's edit becomes ``override_args``. Every
call that was not approved, for whatever reason, becomes ``ToolDenied`` with
the ``NotRun``'s honest sentence, which the model reads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Mapping
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ToolCallPart

from approval_guard._call.outcome import NotRun
from approval_guard._codec.serialize import dumps
from approval_guard._guard import Guard
from approval_guard._options.shape import from_names
from approval_guard._options.spec import build_spec
from approval_guard._options.tool_table import ToolOptions, tool_options
from approval_guard.exceptions import ConfigurationError


async def resolve_deferred(
    requests: DeferredToolRequests,
    guard: Guard,
    *,
    tools: Collection[str] | Mapping[str, ToolOptions | bool] | None = None,
    **options: Any,
) -> DeferredToolResults:
    """Ask the provider about each of ``requests.approvals``, all at once; map the answers.

    ::

        result = await agent.run("Refund payment_123", output_type=[str, DeferredToolRequests])
        if isinstance(result.output, DeferredToolRequests):
            results = await resolve_deferred(result.output, guard, timeout="30m")
            result = await agent.run(message_history=result.all_messages(),
                                     deferred_tool_results=results)

    - approved as sent: ``ToolApproved()``; approved with a reviewer's edit:
      ``ToolApproved(override_args=<the edited arguments>)`` (Pydantic AI validates
      them against the tool's schema before it runs the tool);
    - denied, expired, no decision, cancelled, already answered once:
      ``ToolDenied(<the NotRun's sentence>)``.

    ``tools`` limits which tools' calls are answered here (others are left out
    of the results), with per-tool options as in :func:`guarded`; ``options``
    are ``requires_approval``'s, shared by all. Pydantic AI runs an approved tool
    in the next run: start it at once, since the approval's expiry was checked
    when the answer was made, not when the tool starts (``guarded()`` checks it
    then).

    Args:
        requests: Pydantic AI's ``DeferredToolRequests`` from an agent run.
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        tools: Which tools' calls are asked about, and their options: names, or each name ->
            ``True`` or options; None: every approval.
        **options: Options shared by every call.
    """
    if not isinstance(requests, DeferredToolRequests):
        raise ConfigurationError(
            "resolve_deferred takes Pydantic AI's DeferredToolRequests, "
            f"not {type(requests).__name__}"
        )
    if not isinstance(guard, Guard):
        raise ConfigurationError(f"guard must be an approval_guard.Guard, not {guard!r}")
    if tools is None:
        names = sorted({call.tool_name for call in requests.approvals})
        table = tool_options(names, options) if names else {}
    else:
        table = tool_options(tools, options)
    calls = [call for call in requests.approvals if call.tool_name in table]
    answers = await asyncio.gather(*(_answer(call, guard, table[call.tool_name]) for call in calls))
    return DeferredToolResults(
        approvals={call.tool_call_id: answer for call, answer in zip(calls, answers, strict=True)}
    )


async def _answer(
    call: ToolCallPart, guard: Guard, options: Mapping[str, Any]
) -> ToolApproved | ToolDenied:
    """One deferred call's answer: a guarded call whose run makes the ToolApproved."""
    try:
        arguments = call.args_as_dict(raise_if_invalid=True)
    except (ValueError, AssertionError):
        return ToolDenied(
            f"The model's arguments for {call.tool_name} were not a JSON object, so nothing "
            "was sent for approval and it did not run."
        )

    async def approve(**approved: Any) -> ToolApproved:
        if approved == arguments:
            return ToolApproved()
        # Exact JSON numbers of an edit, as plain JSON for Pydantic AI's validator.
        return ToolApproved(override_args=json.loads(dumps(approved)))

    # Without the tool's schema, only the call's own names are known: an option may
    # name an argument the model left out, which is then not offered for editing.
    fitted = {**options, "editable": [n for n in options.get("editable", ()) if n in arguments]}
    spec = build_spec(
        from_names(approve, fitted.get("tool") or call.tool_name, set(arguments) | _named(options)),
        options=fitted,
        on_not_run=_denied,
        name=call.tool_name,
    )
    answer: ToolApproved | ToolDenied = await guard._call_async(spec, (), dict(arguments))
    return answer


def _named(options: Mapping[str, Any]) -> set[str]:
    """The argument names an option list names (checked as names already)."""
    named = set(options.get("exclude", ()))
    redact = options.get("redact")
    if redact is not None and not callable(redact):
        named.update(str(path).split(".")[0] for path in redact)
    return named


def _denied(not_run: NotRun) -> ToolDenied:
    return ToolDenied(str(not_run))
