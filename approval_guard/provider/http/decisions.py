"""A decision over HTTP (API, page, email): its fields, its refusals' answers, the API's routes.

Each is recorded by :func:`approval_guard.provider.channels.decisions.decide`,
the one decision function every channel uses.

``POST /v1/requests/{id}/decision`` decides one request; ``POST /v1/decisions``
(API 1.3) decides each of a list of ids in turn, each exactly as if it came alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from approval_guard._codec.wire import APPROVED, DENIED
from approval_guard.provider.channels import decisions as channel_decisions
from approval_guard.provider.http.api import client_source, not_pending, request_answer
from approval_guard.provider.http.auth import (
    authenticate,
    authenticated,
    bearer_token,
    require_reviewer,
)
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.grants import grant_json, parse_grant
from approval_guard.provider.http.limits import (
    MAX_NOTE_CHARS,
    MAX_TIMEOUT_SECONDS,
)
from approval_guard.provider.http.render import (
    request_json,
)
from approval_guard.provider.http.responses import (
    ApiError,
    bad,
    duration,
    json_answer,
    json_object,
    no_unknown,
    read_body,
)
from approval_guard.provider.store.models import (
    AlreadyApproved,
    Credential,
    Forbidden,
    Grant,
    LinkUsed,
    NotPendingError,
    StoredRequest,
)
from approval_guard.provider.store.sql.grant_tables import GrantSpec

#: The most ids one ``POST /v1/decisions`` may list (a turn's calls, not a backlog).
MAX_DECISION_IDS = 100
#: The longest id it may list (ours are 36 characters; anything else is no request's).
MAX_ID_CHARS = 200


def decision_fields(obj: dict[str, Any], extra: set[str]) -> tuple[str, str | None, int | None]:
    """``(status, note, valid_for seconds or None)`` of a decision body; 400 for anything else.

    None: no ``valid_for`` was given, and the store applies the default (five
    minutes, or the tool's ``max_valid_for`` when that is shorter).
    """
    if "tool" in obj:
        # API 1.1: the tool is what was asked for; a reviewer may only edit arguments.
        raise bad("a decision cannot change the tool; 'tool' is not a decision field")
    no_unknown(obj, {"status", "note", "valid_for", *extra})
    status = obj.get("status")
    if status not in (APPROVED, DENIED):
        raise bad("'status' must be 'approved' or 'denied'")
    note = obj.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise bad(f"'note' must be null or a string of at most {MAX_NOTE_CHARS} characters")
    valid_for = None
    if obj.get("valid_for") is not None:
        valid_for = duration(obj["valid_for"], "valid_for", 1, MAX_TIMEOUT_SECONDS)
    return str(status), note, valid_for


async def record_decision(
    ctx: Context,
    request_id: str,
    credential: Credential,
    fields: tuple[str, str | None, int | None],
    arguments: dict[str, Any] | None,
    source: str = "api",
    *,
    channel: str = "api",
    grant: GrantSpec | None = None,
) -> Response:
    """Record a decision (the API's and the page's) and answer it (see :func:`apply_decision`).

    With ``grant`` (API 1.3) the answer is the request, plus the grant it gave
    under a top-level ``"grant"`` key.
    """
    with _decision_errors():
        found, given = await ctx.calls(
            lambda: _decided(
                ctx,
                request_id,
                credential,
                fields,
                arguments,
                source,
                channel=channel,
                grant=grant,
            )
        )
    return _answer(ctx, found, given)


def _answer(ctx: Context, found: StoredRequest | None, given: Grant | None) -> Response:
    if found is None or given is None:
        return request_answer(ctx, found)
    return json_answer(ctx.store, 200, {**request_json(found), "grant": grant_json(given)})


async def apply_decision(
    ctx: Context,
    request_id: str,
    credential: Credential,
    fields: tuple[str, str | None, int | None],
    arguments: dict[str, Any] | None,
    source: str = "api",
    *,
    channel: str = "api",
    channel_user: str | None = None,
    use_once: str | None = None,
) -> StoredRequest | None:
    """Record a decision over HTTP (API, page, email) through the one decision function.

    The store checks edits and the tool's rule: a reviewer without the role, or
    approving their own request, is ``403 forbidden``; a second approval by the
    same person ``409 already_approved``; a validity beyond the rule's
    ``max_valid_for`` ``400 invalid_request``; an email link used before
    (``use_once``) ``409 link_used``. None: no such request.
    """
    with _decision_errors():
        found, _ = await ctx.calls(
            lambda: _decided(
                ctx,
                request_id,
                credential,
                fields,
                arguments,
                source,
                channel=channel,
                channel_user=channel_user,
                use_once=use_once,
            )
        )
    return found


async def apply_granting_decision(
    ctx: Context,
    request_id: str,
    credential: Credential,
    fields: tuple[str, str | None, int | None],
    source: str = "api",
    *,
    channel: str,
    channel_user: str | None = None,
    use_once: str | None = None,
    grant: GrantSpec | None,
) -> tuple[StoredRequest | None, Grant | None]:
    """:func:`apply_decision` that also gives ``grant`` (API 1.3; None: none): for email.

    ``(request, the grant given)``; refused exactly as :func:`apply_decision`
    refuses, plus ``400`` for a grant the store will not give.
    """
    with _decision_errors():
        return await ctx.calls(
            lambda: _decided(
                ctx,
                request_id,
                credential,
                fields,
                None,
                source,
                channel=channel,
                channel_user=channel_user,
                use_once=use_once,
                grant=grant,
            )
        )


def _decided(
    ctx: Context,
    request_id: str,
    credential: Credential,
    fields: tuple[str, str | None, int | None],
    arguments: dict[str, Any] | None,
    source: str,
    *,
    channel: str = "api",
    channel_user: str | None = None,
    use_once: str | None = None,
    grant: GrantSpec | None = None,
) -> tuple[StoredRequest | None, Grant | None]:
    """Blocking: the one decision function records it (and the grant it gives)."""
    status, note, valid_for = fields
    return channel_decisions.decide(
        ctx.store,
        ctx.rules,
        request_id,
        credential,
        status,
        note=note,
        valid_for=valid_for,
        arguments=arguments,
        source=source,
        channel=channel,
        channel_user=channel_user,
        use_once=use_once,
        grant=grant,
    )


@contextlib.contextmanager
def _decision_errors() -> Iterator[None]:
    """The store's refusals of a decision, as the API answers them."""
    try:
        yield
    except NotPendingError as exc:
        raise not_pending(exc) from None
    except Forbidden as exc:
        raise ApiError(403, "forbidden", str(exc)) from None
    except (AlreadyApproved, LinkUsed) as exc:
        kind = "already_approved" if isinstance(exc, AlreadyApproved) else "link_used"
        raise ApiError(409, kind, str(exc), extra={"request": request_json(exc.request)}) from None
    except channel_decisions.REFUSALS as exc:  # InvalidEdit, InvalidJSON, ValidityTooLong, ...
        raise bad(str(exc)) from None


def _api_decision(
    credential: Credential, body: bytes
) -> tuple[tuple[str, str | None, int | None], dict[str, Any] | None, GrantSpec | None]:
    """The decision an API body asks for, once the credential may decide (403, 400 otherwise)."""
    require_reviewer(credential)
    obj = json_object(body)
    fields = decision_fields(obj, {"arguments", "grant"})
    arguments = obj.get("arguments")
    if "arguments" in obj and not isinstance(arguments, dict):
        raise bad("'arguments' must be the whole arguments object, edits applied")
    grant = None if obj.get("grant") is None else parse_grant(obj["grant"])
    return fields, arguments, grant


async def decide(ctx: Context, request: Request) -> Response:
    body = await read_body(request)
    request_id = request.path_params["request_id"]
    source = client_source(request)
    token = bearer_token(request)
    if token is None:  # a review session's cookie: its own checks first
        credential = await authenticate(ctx.store, request, calls=ctx.calls)
        fields, arguments, grant = _api_decision(credential, body)
        return await record_decision(
            ctx, request_id, credential, fields, arguments, source, grant=grant
        )

    def work() -> tuple[StoredRequest | None, Grant | None]:
        # The credential and the decision in one worker-thread hop, in the same
        # order as two: polls wait on this, and each hop costs on a busy machine.
        credential = authenticated(ctx.store, token)
        fields, arguments, grant = _api_decision(credential, body)
        return _decided(ctx, request_id, credential, fields, arguments, source, grant=grant)

    with _decision_errors():
        found, given = await ctx.calls(work)
    return _answer(ctx, found, given)


def decision_ids(obj: dict[str, Any]) -> list[str]:
    """The ``ids`` of a many-decision body: 1 to :data:`MAX_DECISION_IDS` distinct strings; 400."""
    ids = obj.get("ids")
    if (
        not isinstance(ids, list)
        or not 1 <= len(ids) <= MAX_DECISION_IDS
        or not all(isinstance(one, str) and 1 <= len(one) <= MAX_ID_CHARS for one in ids)
    ):
        raise bad(
            f"'ids' must be a list of 1 to {MAX_DECISION_IDS} request ids "
            f"(strings of 1 to {MAX_ID_CHARS} characters)"
        )
    if len(set(ids)) != len(ids):
        raise bad("'ids' lists a request twice: list each once")
    return [str(one) for one in ids]


async def decide_each(
    ctx: Context,
    ids: list[str],
    credential: Credential,
    fields: tuple[str, str | None, int | None],
    source: str,
    *,
    channel: str,
) -> list[dict[str, Any]]:
    """Decide each id in turn through :func:`apply_decision`, as if each came alone.

    ``[{"id", "status"} | {"id", "error": {"type", "message"}}]`` in the order
    given: a refusal (as the single decision would answer it) never stops the
    ids after it. Exactly these ids: whatever else is pending is left alone.
    """
    results: list[dict[str, Any]] = []
    for request_id in ids:
        try:
            found = await apply_decision(
                ctx, request_id, credential, fields, None, source, channel=channel
            )
        except ApiError as exc:
            results.append({"id": request_id, "error": {"type": exc.kind, "message": exc.message}})
            continue
        if found is None:
            error = {"type": "not_found", "message": "no such request"}
            results.append({"id": request_id, "error": error})
        else:
            results.append({"id": request_id, "status": found.status})
    return results


async def decide_many(ctx: Context, request: Request) -> Response:
    """``POST /v1/decisions`` (API 1.3): ``{"ids", "status", "note", "valid_for"}``.

    A reviewer's bearer credential, or the review page's session with its CSRF
    header; an instance credential is ``403``. The body is checked whole first
    (``400`` and nothing decided); then ``200 {"results": [...]}`` (see
    :func:`decide_each`).
    """
    body = await read_body(request)
    source = client_source(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    obj = json_object(body)
    fields = decision_fields(obj, {"ids"})
    ids = decision_ids(obj)
    channel = "api" if bearer_token(request) is not None else "page"
    results = await decide_each(ctx, ids, credential, fields, source, channel=channel)
    return json_answer(ctx.store, 200, {"results": results})
