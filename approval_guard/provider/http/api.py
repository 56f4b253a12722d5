"""The API's endpoints (docs/provider-api.md): create, poll, cancel, list, history, events.

Each parses and checks its input here, then calls the store in the thread
pool; a long poll waits on the event loop (``waits.py``), holding no thread.
A decision, from whatever channel, takes the path in ``decisions.py``.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from approval_guard._codec.exact_json import InvalidJSON
from approval_guard._codec.wire import STATUSES
from approval_guard.provider.http.auth import (
    authenticate,
    authenticate_early,
    authenticated_again,
    require_instance,
    require_reviewer,
)
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.limits import (
    IDEMPOTENCY_KEY,
    MAX_BODY_BYTES,
    MAX_LIST,
    MAX_TIMEOUT_SECONDS,
    MAX_TOOL_CHARS,
    MIN_TIMEOUT_SECONDS,
)
from approval_guard.provider.http.render import (
    audit_json,
    history_to_json,
    listed_request_json,
    request_json,
)
from approval_guard.provider.http.responses import (
    ApiError,
    bad,
    check_body_length,
    duration,
    header,
    json_answer,
    json_object,
    no_unknown,
    not_found,
    query_value,
    read_body,
    wait_seconds,
)
from approval_guard.provider.http.waits import long_poll, wait_for_change
from approval_guard.provider.store.models import (
    Credential,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidEdit,
    NotPendingError,
    StoredRequest,
    UnknownRequest,
)

#: The longest ``requested_by`` a create may carry.
MAX_REQUESTED_BY_CHARS = 200
#: The longest ``batch`` (API 1.3: the agent's turn) a create may carry.
MAX_BATCH_CHARS = 200
#: The longest ``context`` (API 1.3: the agent's stated reason) a create may carry.
MAX_CONTEXT_CHARS = 1000


def client_source(request: Request) -> str:
    """Where a request came from, for the audit trail: the client's address."""
    client = request.client
    return client.host if client is not None and client.host else "unknown"


def request_answer(ctx: Context, request: StoredRequest | None) -> Response:
    """200 with the request, or 404 when there is none for this credential."""
    if request is None:
        raise not_found()
    return json_answer(ctx.store, 200, request_json(request))


def not_pending(exc: NotPendingError) -> ApiError:
    return ApiError(
        409,
        "not_pending",
        f"the request is {exc.request.status}, not pending",
        extra={"request": request_json(exc.request)},
    )


async def create(ctx: Context, request: Request) -> Response:
    """``POST /v1/requests``. The key is claimed before the body is read.

    So a duplicate that arrives while the first's body is still on its way
    gets ``409 idempotency_key_in_use``, as one that arrives while it is stored.
    """
    if check_body_length(request) > MAX_BODY_BYTES:
        await read_body(request)  # 413, as for any other endpoint, before anything else
    credential = await authenticate_early(ctx.store, ctx.hints, request, calls=ctx.calls)
    require_instance(credential)
    key = header(request, "idempotency-key")
    if key is None or not IDEMPOTENCY_KEY.fullmatch(key):
        await read_body(request)
        # The early look may be a remembered token revoked since: 401 comes before any 400.
        await run_in_threadpool(authenticated_again, ctx.store, ctx.hints, request, credential)
        raise bad("the Idempotency-Key header is required: 1 to 255 printable ASCII characters")
    try:
        with ctx.store.claim_key(credential.id, key):
            return await _create(ctx, request, credential, key)
    except IdempotencyKeyInUse as exc:
        await run_in_threadpool(authenticated_again, ctx.store, ctx.hints, request, credential)
        raise ApiError(409, "idempotency_key_in_use", str(exc)) from None


async def _create(ctx: Context, request: Request, early: Credential, key: str) -> Response:
    body = await read_body(request)
    # Everything after the body in one store call: the credential again (it may
    # have been revoked since the early look), checks, the store. (A body is at
    # most MAX_BODY_BYTES: parsed in a millisecond or so, on the loop if need be.)
    return await ctx.calls(_create_now, ctx, request, early, key, body)


def _create_now(
    ctx: Context, request: Request, early: Credential, key: str, body: bytes
) -> Response:
    """Blocking: check the credential again and the body, then create (or find) the request."""
    credential = authenticated_again(ctx.store, ctx.hints, request, early)
    obj = json_object(body)
    no_unknown(
        obj,
        {
            "tool",
            "arguments",
            "timeout",
            "editable",
            "requested_by",
            "batch",
            "context",
            "redacted",
        },
    )
    tool = obj.get("tool")
    if not isinstance(tool, str) or not 1 <= len(tool) <= MAX_TOOL_CHARS:
        raise bad(f"'tool' must be a string of 1 to {MAX_TOOL_CHARS} characters")
    arguments = obj.get("arguments")
    if not isinstance(arguments, dict):
        raise bad("'arguments' must be a JSON object")
    timeout = duration(obj.get("timeout"), "timeout", MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS)
    editable = obj.get("editable")
    if editable is not None and not isinstance(editable, list):
        raise bad("'editable' must be a list of argument names")
    requested_by = obj.get("requested_by")
    if requested_by is not None and (
        not isinstance(requested_by, str)
        or not 1 <= len(requested_by) <= MAX_REQUESTED_BY_CHARS
        or not requested_by.isprintable()
        or requested_by != requested_by.strip()
    ):
        raise bad(
            f"'requested_by' must be 1 to {MAX_REQUESTED_BY_CHARS} printable characters, "
            "with no space at either end"
        )
    batch = obj.get("batch")
    if batch is not None and (
        not isinstance(batch, str)
        or not 1 <= len(batch) <= MAX_BATCH_CHARS
        or not batch.isprintable()
        or batch != batch.strip()
    ):
        raise bad(
            f"'batch' must be 1 to {MAX_BATCH_CHARS} printable characters, "
            "with no space at either end"
        )
    context = obj.get("context")
    if context is not None and (not isinstance(context, str) or len(context) > MAX_CONTEXT_CHARS):
        raise bad(f"'context' must be a string of at most {MAX_CONTEXT_CHARS} characters")
    required = ctx.rules.for_tool(tool).approvals_required
    source = client_source(request)
    try:
        result = ctx.store.create_request(
            owner=credential,
            idempotency_key=key,
            tool=tool,
            arguments=arguments,
            timeout_seconds=timeout,
            editable=editable,
            requested_by=requested_by,
            approvals_required=required,
            source=source,
            rules=ctx.rules,
            batch=batch,
            context=context,
            redacted=obj.get("redacted"),  # API 1.3: checked by the store
        )
    except IdempotencyKeyReused as exc:
        # Keys are per credential, so this is the request its own creator made.
        extra = None if exc.request is None else {"request": request_json(exc.request)}
        raise ApiError(422, "idempotency_key_reused", str(exc), extra=extra) from None
    except (InvalidJSON, InvalidEdit) as exc:
        raise bad(str(exc)) from None
    return json_answer(ctx.store, 201 if result.created else 200, request_json(result.request))


async def poll(ctx: Context, request: Request) -> Response:
    await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    wait = wait_seconds(request, ctx.poll_cap)
    request_id = request.path_params["request_id"]
    found = await long_poll(
        ctx.store, ctx.notifier, request_id, credential, wait, request.receive, calls=ctx.calls
    )
    return request_answer(ctx, found)


async def cancel(ctx: Context, request: Request) -> Response:
    body = await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_instance(credential)
    obj = json_object(body, allow_empty=True)
    no_unknown(obj, {"reason"})
    reason = obj.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise bad("'reason' must be a string")
    request_id = request.path_params["request_id"]
    try:
        found = await ctx.calls(
            lambda: ctx.store.cancel(
                request_id, owner=credential, reason=reason, source=client_source(request)
            )
        )
    except NotPendingError as exc:
        raise not_pending(exc) from None
    return request_answer(ctx, found)


def _limit(request: Request) -> int:
    raw = query_value(request, "limit")
    if not raw:
        return MAX_LIST
    try:
        limit = int(raw)
    except ValueError:
        raise bad("'limit' must be an integer") from None
    if not 1 <= limit <= MAX_LIST:
        raise bad(f"'limit' must be between 1 and {MAX_LIST}")
    return limit


async def list_requests(ctx: Context, request: Request) -> Response:
    await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    statuses = [one for value in request.query_params.getlist("status") for one in value.split(",")]
    for status in statuses:
        if status not in STATUSES:
            raise bad(f"'status' must be one or more of {', '.join(STATUSES)}")
    limit = _limit(request)
    before = query_value(request, "before")
    seq = ctx.store.seq

    def read() -> tuple[list[Any], dict[str, Any]]:
        # One more than asked for tells whether another page follows.
        found = ctx.store.list_requests(status=statuses, limit=limit + 1, before=before)
        return found, ctx.store.annotations([r.id for r in found[:limit]])

    try:
        found, annotations = await run_in_threadpool(read)
    except UnknownRequest:
        raise bad("'before' must be the id of a listed request") from None
    more = len(found) > limit
    found = found[:limit]
    ctx.listed_seq = max(ctx.listed_seq, seq)
    return json_answer(
        ctx.store,
        200,
        {
            "requests": [
                listed_request_json(
                    r, annotations.get(r.id), viewer=credential, rule=ctx.rules.for_tool(r.tool)
                )
                for r in found
            ],
            "next_before": found[-1].id if more else None,
        },
    )


async def history(ctx: Context, request: Request) -> Response:
    await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    request_id = request.path_params["request_id"]
    found = await run_in_threadpool(ctx.store.history, request_id)
    if found is None:
        raise not_found()
    rows = await run_in_threadpool(lambda: ctx.store.audit(request_id=request_id))
    return json_answer(
        ctx.store, 200, {**history_to_json(found), "audit": audit_json(rows, display=True)}
    )


async def events(ctx: Context, request: Request) -> Response:
    await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    wait = wait_seconds(request, ctx.poll_cap)
    after_raw = query_value(request, "after")
    if after_raw is None:
        seq = ctx.store.seq
    else:
        try:
            after = int(after_raw)
        except ValueError:
            raise bad("'after' must be an integer") from None
        # A notice nobody has been sent yet is news: answer it at once.
        notice = ctx.notice if ctx.notice_delivered else None
        seq = await wait_for_change(
            ctx.store, ctx.notifier, after, wait, until=lambda: ctx.notice != notice
        )
    out: dict[str, Any] = {"seq": seq}
    if ctx.notice is not None:
        # The page shows it in a banner (the demo: "finished, this page no longer updates").
        out["notice"] = ctx.notice
        ctx.notice_delivered = True
    return json_answer(ctx.store, 200, out)
