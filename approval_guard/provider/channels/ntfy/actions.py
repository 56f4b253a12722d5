"""A button tapped on the phone: ``POST /ntfy/requests/{id}/decision?token=`` decides at once.

The ntfy app sends the action's request itself (``POST``, no body needed), so
the token is the whole credential: it must be genuine, for this request, not
expired, not used (the Approve and Deny buttons of one message share one
use), and its reviewer must still be a live reviewer linked to the very topic
it was published to. Then :func:`~approval_guard.provider.channels.decisions.decide`
records the decision (rules, quorum, self-approval, audit with ``channel``
``"ntfy"`` and the topic shown only in part), marking the token used in the
same transaction. Anything else is a JSON 4xx and records nothing; a ``GET``
(a link preview) is ``405``. No token reaches a log line or an answer.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

import approval_guard.provider.channels.decisions as decisions
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import APPROVED
from approval_guard._codec.wire_models import error_body
from approval_guard.provider.channels.base import Route
from approval_guard.provider.channels.ntfy.tokens import PATH, Link, LinkRefused, read, shown_topic
from approval_guard.provider.http.context import Context
from approval_guard.provider.store.models import (
    AlreadyApproved,
    Credential,
    Forbidden,
    LinkUsed,
    NotPendingError,
)
from approval_guard.provider.store.protocol import StoreProtocol

#: The audit rows' and the decision's channel.
CHANNEL = "ntfy"
#: An outbox item's state once its reviewer's link changed (the store's ``VOIDED``).
_VOIDED = "voided"
_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    # ntfy's web app posts from its own origin and may read the answer: the token is the credential.
    "Access-Control-Allow-Origin": "*",
}
_KINDS = {400: "invalid_link", 403: "forbidden", 404: "not_found", 409: "conflict", 410: "expired"}


def _check(store: StoreProtocol, request_id: str, token: str) -> tuple[Link, Credential]:
    """Blocking: the token's link and its reviewer, live and still on that topic."""
    link = read(store.link_secret(), token, request_id=request_id, now=store.now())
    if store.link_used(link.mail_id):
        raise LinkRefused(
            409, "this notification's buttons have already been used: they decide once"
        )
    reviewer = store.credential(link.reviewer_id)
    if reviewer is None or reviewer.revoked_at is not None or not reviewer.is_reviewer:
        raise LinkRefused(403, "the reviewer this notification was sent to is no longer a reviewer")
    linked = store.reviewer_by_identity(CHANNEL, link.address)
    # Re-linked since (even back to this topic): what was sent to the old link decides nothing.
    if linked is None or linked.id != reviewer.id or store.outbox_state(link.mail_id) == _VOIDED:
        raise LinkRefused(403, "this notification went to a topic that is no longer the reviewer's")
    return link, reviewer


def _answer(status: int, body: dict[str, Any]) -> Response:
    return Response(dump_json(body), status, _HEADERS, "application/json")


def _refused(status: int, message: str) -> Response:
    return _answer(status, error_body(_KINDS.get(status, "invalid_request"), message))


def _status(exc: Exception) -> int:
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, (NotPendingError, AlreadyApproved, LinkUsed)):
        return 409
    return 400


async def decide(ctx: Context, request: Request) -> Response:
    """The button's POST: check the token, then the one decision path (no body is read)."""
    request_id = request.path_params["request_id"]
    tokens = request.query_params.getlist("token")
    try:
        if len(tokens) != 1:
            raise LinkRefused(400, "this button's address has no token (or several)")
        link, reviewer = await ctx.calls(_check, ctx.store, request_id, tokens[0])
    except LinkRefused as exc:
        return _refused(exc.status, exc.message)
    try:
        found, _ = await ctx.calls(
            lambda: decisions.decide(
                ctx.store,
                ctx.rules,
                request_id,
                reviewer,
                link.decision,
                source=request.client.host if request.client else "unknown",
                channel=CHANNEL,
                channel_user=shown_topic(link.address),
                use_once=link.mail_id,
            )
        )
    except decisions.REFUSALS as exc:
        return _refused(_status(exc), decisions.refusal(exc))
    if found is None:
        return _refused(404, "no such request")
    if found.status == APPROVED:
        said = "Approved: the call may now run."
    elif found.is_pending:
        said = f"Approval counted: {len(found.approvals)} of {found.approvals_required} so far."
    else:
        said = "Denied: the call will not run."
    body = {"request_id": found.id, "status": found.status, "message": said}
    return _answer(200, body)


ROUTES: tuple[Route, ...] = ((PATH, {"POST": decide}),)
