"""A reviewer's edit (API 1.1 ``decision.arguments``): checked, converted, or refused.

The tool runs with an edit only when every changed name was sent as editable
and the provider's own echo lists it as editable too, and every new value
converts exactly to its parameter's annotation. Anything doubtful means the
tool does not run (``NOT_OBTAINED``): what runs is always what a person saw
or set.
"""

from __future__ import annotations

import logging
from typing import Any

from approval_guard._call.ops import CallPlan, Invoke
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._call.state import CallState, Edit
from approval_guard._codec.marker import holds_marker_key
from approval_guard._codec.serialize import dumps, same_or_too_deep
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard._options.converters import EditError
from approval_guard._options.spec import ToolSpec

log = logging.getLogger("approval_guard")

#: An edited value longer than this (as JSON) is cut in the log line.
LOG_VALUE_LIMIT = 200


def apply_edit(call: CallState, request: ApprovalRequest) -> NotRun | Edit | None:
    """The approval's edit checked and converted; None when it changes nothing."""
    plan = call.plan
    decision = request.decision
    assert decision is not None
    approved = decision.arguments
    if approved is None or same_or_too_deep(approved, plan.arguments):
        return None
    tool = plan.tool

    def refuse(why: str) -> NotRun:
        log.error("the approved edit of %s (%s) cannot be applied: %s", tool, request.id, why)
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The approval came with changed arguments, but the approved edit could not be "
            f"applied ({why}), so {tool} did not run.",
            decision=decision,
            edit=True,
        )

    if not plan.editable:
        return refuse("the call offered no argument for editing")
    if approved.keys() != plan.arguments.keys():
        return refuse("it adds or leaves out arguments")
    changed = []
    for name, sent in plan.arguments.items():
        if not same_or_too_deep(approved[name], sent):
            changed.append(name)
    echoed = request.editable or ()
    values: dict[str, Any] = {}
    for name in sorted(changed):
        if name not in plan.editable:
            return refuse(f"it changes {name!r}, which the call did not offer for editing")
        if name not in echoed:
            return refuse(f"the provider's request does not list {name!r} as editable")
        value = approved[name]
        if holds_marker_key(value):
            return refuse(f"the new value of {name!r} holds a redaction marker")
        try:
            values[name] = plan.converters[name](value)
        except (EditError, KeyError):
            return refuse(f"the new value of {name!r} does not convert to its parameter's type")
        except Exception as exc:  # a converter must never make the call raise
            return refuse(f"converting the new value of {name!r} failed ({type(exc).__name__})")
    if plan.check_edit is not None:
        # The tool's own check of the whole edited call (a framework's schema), before
        # the claim: what it refuses never runs.
        try:
            values = dict(plan.check_edit(values))
        except EditError as exc:
            return refuse(f"the tool's own argument check refused it: {exc}")
        except Exception as exc:  # the message may quote values: only the type is shown
            return refuse(f"the tool's own argument check refused it ({type(exc).__name__})")
    return Edit(changed=tuple(sorted(changed)), values=values, after=dict(approved))


def log_edit_run(plan: CallPlan, request_id: str, edit: Edit) -> None:
    """Say that the tool now runs with a reviewer's edit: once, when it does.

    Not when the edit is accepted: the claim or a last check may still stop the
    call (a tool use already allowed), and the log must say what happened.
    """
    log.warning(
        "%s (%s) runs with a reviewer's edit: %s",
        plan.tool,
        request_id,
        "; ".join(
            f"{name}: {_shown(plan.arguments[name])} -> {_shown(edit.after[name])}"
            for name in edit.changed
        ),
    )


def _shown(value: Any) -> str:
    """A JSON value for the log, bounded (the sent form: redacted values stay markers)."""
    try:
        text = dumps(value).decode("utf-8")
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= LOG_VALUE_LIMIT else text[: LOG_VALUE_LIMIT - 3] + "..."


def edited(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any], op: Invoke
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments, with a reviewer's approved edits in place of the caller's."""
    edits = op.edits
    if not edits:
        return args, kwargs
    if spec.by_name:
        return args, {**kwargs, **edits}
    bound = spec.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    for name, value in edits.items():
        bound.arguments[name] = value
    return bound.args, bound.kwargs
