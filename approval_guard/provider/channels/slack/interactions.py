"""``POST /slack/interactions``: Slack's clicks and modal submissions, verified, answered fast.

Slack posts a form with one field, ``payload`` (JSON), signed with the app's
signing secret. In order:

1. a missing, wrong or stale signature (a timestamp more than five minutes
   off) is ``401 unauthorized``, and nothing else happens;
2. the same signed request seen before (a replay) is acknowledged and does
   nothing, so it can never record a second decision;
3. a click on **Approve** records the approval at once; **Deny…** and
   **Edit and approve…** open their modal (``views.open``, after the answer:
   its ``trigger_id`` lasts 3 s); a modal's submission records the decision.
   A batch's **Approve all N** and **Deny all N…** (API 1.3) do the same for
   exactly the ids their message listed, each as if alone, and the reply
   says what happened to each.

The decision is committed before the answer, and the answer comes well within
Slack's 3 s: the message's update is queued in the outbox with the decision,
and the reply only the clicker sees (``chat.postEphemeral``) is sent after the
answer. A double click is two requests: the second is refused by the store as
on the API (``already approved``, or ``not pending``), and said so.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from approval_guard._codec.duration import check_duration_text
from approval_guard._codec.wire import APPROVED, DENIED
from approval_guard.provider.channels.slack import actions
from approval_guard.provider.channels.slack.blocks import (
    APPROVE,
    APPROVE_ALL,
    DENY,
    DENY_ALL,
    EDIT,
    GRANT,
    MAX_INPUT,
    batch_ids,
    text,
)
from approval_guard.provider.channels.slack.client import call, make_client
from approval_guard.provider.channels.slack.modals import (
    deny_all_modal,
    deny_modal,
    edit_modal,
    grant_modal,
)
from approval_guard.provider.channels.slack.settings import SlackSettings
from approval_guard.provider.channels.slack.verify import is_from_slack, replay_digest
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.responses import ApiError, bad, read_body
from approval_guard.provider.store.sql.grant_tables import GrantSpec

logger = logging.getLogger("approval_guard.provider")

#: Seconds a reply or a modal's opening may take (after the answer).
REPLY_TIMEOUT = 5


def _ack(body: dict[str, Any] | None = None, task: BackgroundTask | None = None) -> Response:
    content = b"" if body is None else json.dumps(body).encode("utf-8")
    media = "application/json" if body is not None else "text/plain"
    return Response(content, status_code=200, media_type=media, background=task)


def _send_later(settings: SlackSettings, method: str, **arguments: Any) -> BackgroundTask:
    def send() -> None:
        answer = call(make_client(settings, timeout=REPLY_TIMEOUT), method, **arguments)
        if not answer.ok:
            logger.info("Slack %s failed: %s", method, answer.error)

    return BackgroundTask(send)  # a plain function: Starlette runs it in the thread pool


def _reply(
    settings: SlackSettings, channel: object, user: str, reply: str
) -> BackgroundTask | None:
    if not isinstance(channel, str) or not channel:
        return None
    return _send_later(settings, "chat.postEphemeral", channel=channel, user=user, text=reply)


def _payload(body: bytes) -> dict[str, Any]:
    try:
        form = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError, RecursionError):
        raise bad(
            "expected a form with a 'payload' field holding JSON (Slack's interaction)"
        ) from None
    if not isinstance(payload, dict):
        raise bad("the 'payload' must be a JSON object")
    return payload


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


async def interactions(ctx: Context, request: Request, settings: SlackSettings) -> Response:
    """``POST /slack/interactions`` for the Slack app ``settings`` (see the module docstring)."""
    body = await read_body(request)
    headers = {name.lower(): value for name, value in request.headers.items()}
    store = ctx.store
    if not is_from_slack(settings.signing_secret, body, headers, lambda: store.now().timestamp()):
        raise ApiError(401, "unauthorized", "the Slack signature is missing, wrong or stale")
    if not await run_in_threadpool(store.note_interaction, replay_digest(body, headers)):
        logger.warning("a replayed Slack interaction was ignored")
        return _ack()
    payload = _payload(body)
    user = payload.get("user")
    slack_user = _text(user.get("id")) if isinstance(user, dict) else None
    if slack_user is None:
        raise bad("the payload names no user")
    kind = payload.get("type")
    if kind == "block_actions":
        return await _clicked(ctx, settings, payload, slack_user)
    if kind == "view_submission":
        return await _submitted(ctx, settings, payload, slack_user)
    return _ack()  # view_closed, and whatever else Slack may send: nothing to do


async def _clicked(
    ctx: Context, settings: SlackSettings, payload: dict[str, Any], slack_user: str
) -> Response:
    found = payload.get("actions")
    action = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {}
    action_id, request_id = action.get("action_id"), _text(action.get("value"))
    if action_id not in (APPROVE, DENY, EDIT, GRANT, APPROVE_ALL, DENY_ALL) or request_id is None:
        return _ack()
    channel = _text(_object(payload.get("container")).get("channel_id")) or _text(
        _object(payload.get("channel")).get("id")
    )
    if action_id in (APPROVE_ALL, DENY_ALL):
        return await _clicked_all(ctx, settings, payload, slack_user, channel, action_id)
    if action_id == GRANT:
        return await _open_grant(ctx, settings, payload, slack_user, request_id, channel)
    if action_id == APPROVE:
        outcome = await run_in_threadpool(
            actions.decide, ctx.store, ctx.rules, slack_user, request_id, APPROVED
        )
        return _ack(task=_reply(settings, channel, slack_user, outcome.reply))
    edit = action_id == EDIT
    shown, why = await run_in_threadpool(
        actions.check_may_open, ctx.store, ctx.rules, slack_user, request_id, edit=edit
    )
    trigger = _text(payload.get("trigger_id"))
    if shown is None or trigger is None:
        return _ack(task=_reply(settings, channel, slack_user, why or "Not recorded."))
    view = edit_modal(shown, channel) if edit else deny_modal(shown, channel)
    return _ack(task=_send_later(settings, "views.open", trigger_id=trigger, view=view))


async def _clicked_all(
    ctx: Context,
    settings: SlackSettings,
    payload: dict[str, Any],
    slack_user: str,
    channel: str | None,
    action_id: object,
) -> Response:
    """A batch's "Approve all N" (decided now) or "Deny all N…" (its modal opens)."""
    found = payload.get("actions")
    ids = batch_ids(found[0].get("value") if isinstance(found, list) else None)
    if not ids:
        return _ack(task=_reply(settings, channel, slack_user, "Not recorded: no requests."))
    if action_id == APPROVE_ALL:
        outcome = await run_in_threadpool(
            actions.decide_all, ctx.store, ctx.rules, slack_user, ids, APPROVED
        )
        return _ack(task=_reply(settings, channel, slack_user, outcome.reply))
    if await run_in_threadpool(actions.reviewer_of, ctx.store, slack_user) is None:
        reply = actions.NOT_LINKED.format(user=text(slack_user))
        return _ack(task=_reply(settings, channel, slack_user, reply))
    trigger = _text(payload.get("trigger_id"))
    if trigger is None:
        return _ack()
    view = deny_all_modal(ids, channel)
    return _ack(task=_send_later(settings, "views.open", trigger_id=trigger, view=view))


def _inputs(view: dict[str, Any]) -> dict[str, str]:
    """A submitted view's inputs: block id -> the text typed (one input per block), uncut."""
    state = view.get("state")
    values = state.get("values") if isinstance(state, dict) else None
    out: dict[str, str] = {}
    if not isinstance(values, dict):
        return out
    for block_id, elements in values.items():
        if not isinstance(elements, dict):
            continue
        for element in elements.values():
            if isinstance(element, dict) and isinstance(element.get("value"), str):
                out[str(block_id)] = element["value"]
    return out


async def _submitted(
    ctx: Context, settings: SlackSettings, payload: dict[str, Any], slack_user: str
) -> Response:
    view = _object(payload.get("view"))
    callback = view.get("callback_id")
    try:
        meta = json.loads(view.get("private_metadata") or "")
    except (TypeError, ValueError, RecursionError):
        meta = None
    if callback not in (DENY, EDIT, GRANT, DENY_ALL) or not isinstance(meta, dict):
        return _ack()
    channel = _text(meta.get("channel"))
    ids = batch_ids(meta.get("requests")) if callback == DENY_ALL else [meta.get("request")]
    request_id = _text(ids[0]) if ids else None
    if request_id is None:
        return _ack()
    if callback == GRANT:
        return await _granted(ctx, settings, view, slack_user, request_id, channel)
    values = _inputs(view)
    note = (values.get("note") or "")[:MAX_INPUT].strip() or None
    if callback in (DENY, DENY_ALL):
        reason = (values.get("reason") or "")[:MAX_INPUT].strip()
        if not reason:
            return _ack(
                {
                    "response_action": "errors",
                    "errors": {"reason": "Say why: the agent receives it."},
                }
            )
        if callback == DENY_ALL:
            outcome = await run_in_threadpool(
                lambda: actions.decide_all(
                    ctx.store, ctx.rules, slack_user, [str(one) for one in ids], DENIED, note=reason
                )
            )
        else:
            outcome = await run_in_threadpool(
                actions.decide, ctx.store, ctx.rules, slack_user, request_id, DENIED, note=reason
            )
        return _ack(task=_reply(settings, channel, slack_user, outcome.reply))
    current = await run_in_threadpool(ctx.store.get_request, request_id)
    if current is None:
        return _ack(task=_reply(settings, channel, slack_user, "Not recorded: no such request."))
    arguments, errors = actions.parse_edits(current, values)
    if errors:
        return _ack({"response_action": "errors", "errors": errors})
    outcome = await run_in_threadpool(
        lambda: actions.decide(
            ctx.store, ctx.rules, slack_user, request_id, APPROVED, note=note, arguments=arguments
        )
    )
    return _ack(task=_reply(settings, channel, slack_user, outcome.reply))


# ---------------------------------------------------------------- standing grants (API 1.3)


async def _open_grant(
    ctx: Context,
    settings: SlackSettings,
    payload: dict[str, Any],
    slack_user: str,
    request_id: str,
    channel: str | None,
) -> Response:
    """ "Approve and allow for…": the grant modal, or the reply saying why not."""
    shown, why = await run_in_threadpool(
        actions.check_may_grant, ctx.store, ctx.rules, slack_user, request_id
    )
    trigger = _text(payload.get("trigger_id"))
    if shown is None or trigger is None:
        return _ack(task=_reply(settings, channel, slack_user, why or "Not recorded."))
    view = grant_modal(shown, channel, ctx.rules.for_tool(shown.tool))
    return _ack(task=_send_later(settings, "views.open", trigger_id=trigger, view=view))


def _chosen(view: dict[str, Any], block_id: str) -> str | None:
    """A submitted view's ``static_select`` choice in block ``block_id``."""
    state = _object(view.get("state"))
    elements = _object(_object(state.get("values")).get(block_id))
    for element in elements.values():
        option = _object(_object(element).get("selected_option"))
        if isinstance(option.get("value"), str):
            return str(option["value"])
    return None


async def _granted(
    ctx: Context,
    settings: SlackSettings,
    view: dict[str, Any],
    slack_user: str,
    request_id: str,
    channel: str | None,
) -> Response:
    """The grant modal's submission: approve, and give a same-scope grant for the chosen time."""
    current = await run_in_threadpool(ctx.store.get_request, request_id)
    if current is None:
        return _ack(task=_reply(settings, channel, slack_user, "Not recorded: no such request."))
    rule = ctx.rules.for_tool(current.tool)
    errors: dict[str, str] = {}
    chosen = _chosen(view, "for")
    seconds = 0
    try:
        seconds = check_duration_text(chosen, "the duration", 1, rule.max_grant)
    except ValueError:
        errors["for"] = "Choose how long the grant lasts."
    values = _inputs(view)
    uses, why = actions.parse_uses(values.get("uses"))
    if why is not None:
        errors["uses"] = why
    if errors:
        return _ack({"response_action": "errors", "errors": errors})
    note = (values.get("note") or "")[:MAX_INPUT].strip() or None
    grant = GrantSpec(for_seconds=seconds, uses=uses, match={}, requested_by="same")
    outcome = await run_in_threadpool(
        lambda: actions.decide(
            ctx.store, ctx.rules, slack_user, request_id, APPROVED, note=note, grant=grant
        )
    )
    return _ack(task=_reply(settings, channel, slack_user, outcome.reply))
