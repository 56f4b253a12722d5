"""Outcomes of a guarded call that did not run: :class:`Reason` and :class:`NotRun`."""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs


class Reason(str, enum.Enum):
    """Why a guarded call did not run. The value is a stable, lower-case string."""

    #: A person denied the request.
    DENIED = "denied"
    #: No valid decision within the limits: the request expired undecided, the
    #: adapter's own limit came, or the provider was unreachable or refused it.
    NOT_OBTAINED = "not_obtained"
    #: Approved, but the approval's ``expires_at`` passed before the call could start.
    APPROVAL_EXPIRED = "approval_expired"
    #: The harness abandoned the call, or the request was cancelled at the provider.
    CANCELLED = "cancelled"
    #: The execution record says this approval's call has already started or run.
    ALREADY_EXECUTED = "already_executed"

    def __str__(self) -> str:
        return self.value


@attrs.frozen
class NotRun:
    """A guarded call that did not run, and why, in one honest sentence.

    Returned (never raised) in place of the tool's result. ``str(not_run)`` is
    the message and then the ``advice`` (what to do next), so it can be handed
    back to a model as the tool's output::

        out = issue_refund("payment_123", 4900)
        if isinstance(out, ag.NotRun):
            return str(out)   # "A person denied this call to issue_refund: ... Do not retry ..."

    Attributes:
        reason: Why, as a stable code (:class:`~approval_guard.Reason`).
        message: The honest sentence: what happened, for a person or a model.
        tool: The tool's name.
        arguments: The arguments as sent for approval (redacted values as markers; none when nothing
            could be sent).
        request_id: The approval request's id, when one was made.
        status: The request's last status at the provider, when known.
        note: The reviewer's note, for a decision.
        advice: What to do next, for a model (see ``requires_approval(messages=...)``).
        decided_by: Who decided, as the provider names them (API 1.1; ``"alice, bob"`` for a
            quorum).
    """

    reason: Reason
    message: str
    tool: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    request_id: str | None = None
    status: str | None = None
    note: str | None = None
    #: What to do next, for a model (see ``requires_approval(messages=...)``).
    advice: str = ""
    #: Who decided, as the provider names them (API 1.1; ``"alice, bob"`` for a quorum).
    decided_by: str | None = None

    def __str__(self) -> str:
        if not self.advice:
            return self.message
        # A reviewer's note may end without a full stop: the advice is its own sentence.
        stop = "" if self.message.endswith((".", "!", "?")) else "."
        return f"{self.message}{stop} {self.advice}"

    def __bool__(self) -> bool:
        # A call that did not run is never "truthy success", so `if result:` fails closed.
        return False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, for frameworks that want structured tool output."""
        return {
            "ran": False,
            "reason": self.reason.value,
            "message": self.message,
            "tool": self.tool,
            "arguments": self.arguments,
            "request_id": self.request_id,
            "status": self.status,
            "note": self.note,
            "decided_by": self.decided_by,
            "advice": self.advice,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)
