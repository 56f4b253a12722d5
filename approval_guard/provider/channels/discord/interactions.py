"""``POST /discord/interactions``: Discord's clicks and modal submissions, verified, decided.

Discord posts each interaction as JSON, signed with the application's key.
In order:

1. a missing, wrong or stale signature (a timestamp more than five minutes
   off) is ``401 unauthorized``, and nothing else happens;
2. ``PING`` (type 1, Discord checking the endpoint) is answered ``{"type": 1}``;
3. a click on **Approve** (type 3) records the approval; **Deny…** opens a
   modal asking why (type 9), and its submission (type 5) records the denial
   with that reason as the note. Both decide through the one decision path
   (:func:`approval_guard.provider.channels.decisions.decide`, ``channel``
   ``"discord"``, ``channel_user`` the Discord user id) as the reviewer the
   user id is linked to; a recorded decision answers with the message as it is
   now (type 7: the buttons go once the request is decided).

Whatever is refused (an unlinked or removed user, one the tool's rule does not
let decide, self-approval, a request no longer pending, the same signed
interaction sent again) records nothing and is answered with a reply only the
clicker sees (type 4, flags 64).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from approval_guard._codec.wire import APPROVED, DENIED, PENDING
from approval_guard.provider.channels import decisions
from approval_guard.provider.channels.discord.message import (
    APPROVE,
    DENY,
    DENY_REASON,
    MAX_REASON,
    REASON,
    deny_modal,
    message,
    parse_custom_id,
    reply,
    submitted_text,
    updated,
)
from approval_guard.provider.channels.discord.settings import check_user
from approval_guard.provider.channels.discord.verify import is_from_discord
from approval_guard.provider.http.responses import ApiError, bad, json_answer, read_body
from approval_guard.provider.rules.checks import refusal

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from starlette.requests import Request
    from starlette.responses import Response

    from approval_guard.provider.http.context import Context
    from approval_guard.provider.store.models import Credential

logger = logging.getLogger("approval_guard.provider")

#: Interaction types (Discord's ``InteractionType``).
PING, MESSAGE_COMPONENT, MODAL_SUBMIT = 1, 3, 5
#: Where Discord posts interactions (the application's Interactions Endpoint URL's path).
PATH = "/discord/interactions"
NOT_LINKED = (
    "Not recorded: your Discord user ({user}) is not linked to a reviewer of this provider. "
    "An operator can link it: approval-guard reviewers link NAME --discord-user {user}"
)


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _user(interaction: dict[str, Any]) -> str | None:
    """The clicker's user id: ``member.user.id`` in a server, ``user.id`` in a DM."""
    found = _object(_object(interaction.get("member")).get("user")).get("id")
    if found is None:
        found = _object(interaction.get("user")).get("id")
    try:
        return check_user(found) if isinstance(found, str) else None
    except ValueError:
        return None


class Interactions:
    """The route's handler for one configured application.

    :param key: the application's public key.
    :param public_url: the provider's public URL (the message's link), or None.
    """

    def __init__(self, key: Ed25519PublicKey, *, public_url: str | None) -> None:
        self._key = key
        self._public_url = public_url

    async def __call__(self, ctx: Context, request: Request) -> Response:
        """``POST /discord/interactions`` (see the module's docstring)."""
        body = await read_body(request)
        headers = {name.lower(): value for name, value in request.headers.items()}
        store = ctx.store
        if not is_from_discord(self._key, body, headers, store.now().timestamp()):
            raise ApiError(401, "unauthorized", "the Discord signature is missing, wrong or stale")
        try:
            interaction = json.loads(body)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise bad("expected a Discord interaction (a JSON object)") from None
        if not isinstance(interaction, dict):
            raise bad("expected a Discord interaction (a JSON object)")
        kind = interaction.get("type")
        if kind == PING:
            return json_answer(store, 200, {"type": 1})
        if kind not in (MESSAGE_COMPONENT, MODAL_SUBMIT):
            return json_answer(store, 200, reply("Not recorded: this provider has no commands."))
        user = _user(interaction)
        if user is None:
            raise bad("the interaction names no user")
        data = _object(interaction.get("data"))
        parsed = parse_custom_id(data.get("custom_id"))
        if parsed is None:
            return json_answer(store, 200, reply("Not recorded: not a button of this provider."))
        action, request_id = parsed
        key = _once_key(interaction)
        if kind == MESSAGE_COMPONENT and action == APPROVE:
            answer = await self._decide(ctx, user, request_id, APPROVED, None, key)
        elif kind == MESSAGE_COMPONENT and action == DENY:
            answer = await self._open_deny(ctx, user, request_id)
        elif kind == MODAL_SUBMIT and action == DENY_REASON:
            reason = (submitted_text(data, REASON) or "")[:MAX_REASON].strip()
            if not reason:
                answer = reply("Not recorded: say why you deny it (the agent receives it).")
            else:
                answer = await self._decide(ctx, user, request_id, DENIED, reason, key)
        else:
            answer = reply("Not recorded: not a button of this provider.")
        return json_answer(store, 200, answer)

    async def _reviewer(self, ctx: Context, user: str) -> Credential | None:
        return await ctx.calls(ctx.store.reviewer_by_identity, "discord", user)

    async def _open_deny(self, ctx: Context, user: str, request_id: str) -> dict[str, Any]:
        """The modal asking why, or the reply saying why not (checked again on submit)."""
        reviewer = await self._reviewer(ctx, user)
        if reviewer is None:
            return reply(NOT_LINKED.format(user=user))
        found = await ctx.calls(ctx.store.get_request, request_id)
        if found is None:
            return reply("Not recorded: this provider has no such request.")
        if found.status != PENDING:
            return reply(f"Not recorded: this request is already {found.status}.")
        why = refusal(found, ctx.rules.for_tool(found.tool), reviewer, DENIED)
        if why is not None:
            return reply(f"Not recorded: {why}.")
        return deny_modal(found)

    async def _decide(
        self,
        ctx: Context,
        user: str,
        request_id: str,
        status: str,
        note: str | None,
        key: str | None,
    ) -> dict[str, Any]:
        reviewer = await self._reviewer(ctx, user)
        if reviewer is None:
            return reply(NOT_LINKED.format(user=user))
        try:
            found, _ = await ctx.calls(
                decisions.decide,
                ctx.store,
                ctx.rules,
                request_id,
                reviewer,
                status,
                note=note,
                source="discord",
                channel="discord",
                channel_user=user,
                use_once=key,
            )
        except decisions.REFUSALS as exc:
            return reply(decisions.refusal(exc))
        if found is None:
            return reply("Not recorded: this provider has no such request.")
        rule = ctx.rules.for_tool(found.tool)
        body = message(
            found,
            now=ctx.store.now(),
            approvers=list(rule.approvers) if rule.approvers else None,
            public_url=self._public_url,
        )
        logger.info("Discord user %s decided request %s: %s", user, request_id, status)
        return updated(body)


def _once_key(interaction: dict[str, Any]) -> str | None:
    """What makes one signed interaction single-use: ``discord:`` and its id."""
    found = interaction.get("id")
    try:
        return "discord:" + check_user(found) if isinstance(found, str) else None
    except ValueError:
        return None
