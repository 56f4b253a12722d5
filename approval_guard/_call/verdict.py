"""Reading the provider's answers: is it about this call, and what did the person decide?

Fail closed: an answer that cannot be parsed, names another request, tool or
arguments, or reports a decision that does not hang together, means the tool
does not run.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs

from approval_guard._call.outcome import NotRun, Reason
from approval_guard._call.state import CallState
from approval_guard._codec.clock import ClockSample
from approval_guard._codec.serialize import same_json, same_or_too_deep
from approval_guard._codec.wire import APPROVED, CANCELLED, DENIED, EXPIRED, STATUSES, WireError
from approval_guard._codec.wire_models import ApprovalRequest, Decision, parse_request
from approval_guard._transport.answer import Answer

log = logging.getLogger("approval_guard")

ABSENT, UNREADABLE, DIFFERENT = "absent", "unreadable", "different"


def same_decision(a: Decision | None, b: Decision | None) -> bool:
    """The same decision: equal fields, and edited arguments the same JSON (1 is not true)."""
    if a is None or b is None:
        return a is b
    if attrs.evolve(a, arguments=None) != attrs.evolve(b, arguments=None):
        return False
    if a.arguments is None or b.arguments is None:
        return a.arguments is b.arguments
    return same_or_too_deep(a.arguments, b.arguments)


def check_echo(
    call: CallState, answer: Answer, *, expect_id: str | None
) -> ApprovalRequest | NotRun:
    """Parse an answer and check it is about exactly the call we sent."""
    try:
        request = parse_request(answer.body)
    except Exception as exc:  # WireError, or anything else a body can provoke
        text = str(exc) if isinstance(exc, WireError) else f"unexpected {type(exc).__name__}"
        log.error("unusable answer from the provider: %s", text)
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The approval provider's answer could not be understood ({text}), so "
            f"{call.plan.tool} did not run.",
        )
    mismatch = None
    if expect_id is not None and request.id != expect_id:
        mismatch = "a different request id"
    elif request.tool != call.plan.tool:
        mismatch = "a different tool name"
    elif not same_or_too_deep(request.arguments, call.plan.arguments):
        mismatch = "different arguments"
    elif not same_requester(request, call):
        mismatch = "a different requested_by"
    # echoed(), written out: this runs on every answer.
    elif request.batch is not None and request.batch != call.plan.batch:
        mismatch = "a different batch"
    elif request.context is not None and request.context != call.plan.context:
        mismatch = "a different context"
    if call.request is None or mismatch is None:
        call.request = request
    call.last_status = request.status
    if mismatch is not None:
        log.error("the provider's answer names %s than the call sent", mismatch)
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"The approval provider's answer named {mismatch} than the call sent, so "
            f"{call.plan.tool} did not run.",
        )
    return request


def same_requester(request: ApprovalRequest, call: CallState) -> bool:
    """The request is for the person the call named, or the provider did not say (API 1.0).

    An echo of someone else (or of someone when the call named nobody) is not
    this call: whoever approved it was checked against another person.
    """
    return echoed(request.requested_by, call.plan.requested_by)


def echoed(echo: str | None, sent: str | None) -> bool:
    """An echoed field (``requested_by``, ``batch``, ``context``) is what was sent.

    None: the provider did not echo it (an older one), which is no mismatch; the
    echo of another value, or of one the call never sent, is another request.
    """
    return echo is None or echo == sent


def status_in(body: Any, request_id: str) -> str | None:
    """The status of ``request_id`` as a body describes it, or None if it does not."""
    try:
        request = parse_request(body)
    except Exception:
        return None
    if request.id != request_id or request.status not in STATUSES:
        return None
    return request.status


def original_request(call: CallState, answer: Answer) -> ApprovalRequest | str:
    """The request a 422 ``idempotency_key_reused`` names, if it is exactly this call."""
    body = answer.body
    raw = body.get("request") if isinstance(body, dict) else None
    if raw is None:
        return ABSENT
    try:
        original = parse_request(raw)
        same = (
            original.tool == call.plan.tool
            and same_json(original.arguments, call.plan.arguments)
            and same_requester(original, call)
            and echoed(original.batch, call.plan.batch)
            and echoed(original.context, call.plan.context)
        )
    except Exception:  # WireError, or a structure too deep to compare
        return UNREADABLE
    return original if same else DIFFERENT


def reused_key(call: CallState, answer: Answer) -> NotRun | tuple[ApprovalRequest, ClockSample]:
    """A 422 for this call's key: adopt the original request if it asks exactly this.

    A harness retry with less time left sends a different ``timeout`` and
    nothing else; the request first made with the key is the same call.
    Its deadline maps as usual; our own end stays this call's limit.
    """
    tool = call.plan.tool
    original = original_request(call, answer)
    if isinstance(original, ApprovalRequest):
        call.request = original
        call.last_status = original.status
        log.info(
            "adopted the request first created with this idempotency key: tool=%s "
            "request_id=%s status=%s",
            tool,
            original.id,
            original.status,
        )
        return original, call.sampled(answer, original)
    if original == DIFFERENT:
        why = (
            "was first used to ask about a different tool or different arguments "
            "(or for another requested_by, batch or context)"
        )
        if call.plan.redacted:
            # A new process with a new key makes other markers for the same secret.
            why += (
                " (if it was this call from another process, its redaction markers differ: "
                "give every process the same Guard(redaction_key=...))"
            )
    elif original == UNREADABLE:
        why = "was first used for a request that the answer did not describe usably"
    else:
        why = "was first used for a different request, which the answer did not include"
    return call.not_run(
        Reason.NOT_OBTAINED,
        f"The approval provider refused the request ({answer.describe()}): this call's "
        f"idempotency key {why}, so {tool} did not run and nothing new was created.",
    )


def decide(
    call: CallState, request: ApprovalRequest, sample: ClockSample
) -> NotRun | tuple[ApprovalRequest, ClockSample]:
    """A decided request: the approval to check and use, or why there is none."""
    tool = call.plan.tool
    decision = request.decision
    note = decision.note if decision is not None else None
    if request.status == APPROVED:
        if decision is None or decision.status != APPROVED:
            return call.not_run(
                Reason.NOT_OBTAINED,
                f"The provider reported an approval without an approved decision, so {tool} "
                "did not run.",
            )
        if decision.expires_at is None:
            return call.not_run(
                Reason.NOT_OBTAINED,
                f"The approval carried no expiry time, so its validity could not be checked "
                f"and {tool} did not run.",
                decision=decision,
            )
        return request, sample
    if request.status == DENIED:
        if decision is None or decision.status != DENIED:
            return call.not_run(
                Reason.NOT_OBTAINED,
                f"The provider reported a denial without a decision, so {tool} did not run.",
            )
        reason_text = f": {note}" if note else "."
        grant, rule = decision.grant, decision.rule
        if grant is not None:
            # A person's standing choice denied it, at create time: not a click just now.
            of = f" of {grant.granted_by}" if grant.granted_by else ""
            text = f"This call to {tool} was denied by standing denial {grant.id}{of}"
        elif rule is not None:
            text = f"This call to {tool} was denied by rule {rule}"
        else:
            text = f"A person denied this call to {tool}"
        return call.not_run(Reason.DENIED, f"{text}{reason_text}", decision=decision)
    if request.status == EXPIRED:
        return call.not_run(
            Reason.NOT_OBTAINED,
            f"Nobody decided on the request before its deadline, so {tool} did not run; "
            "it was not denied.",
        )
    if request.status == CANCELLED:
        return call.not_run(
            Reason.CANCELLED,
            f"The approval request for {tool} was cancelled at the provider, so it did not run.",
        )
    return call.not_run(
        Reason.NOT_OBTAINED,
        f"The provider reported an unknown status {request.status!r}, so {tool} did not run.",
    )
