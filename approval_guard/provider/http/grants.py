"""The grants' endpoints (API 1.3): a grant in a decision's body, and list, show, revoke, approve.

Only reviewers see or change grants (an agent's credential is ``403``). A
grant's scope is checked by the store against the request it is given on, in
the decision's own transaction; what can be refused by its shape alone is
refused here, ``400`` before anything is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from approval_guard._codec.wire import format_timestamp
from approval_guard.provider.http.api import client_source
from approval_guard.provider.http.auth import authenticate, require_reviewer
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.limits import MAX_NOTE_CHARS
from approval_guard.provider.http.render import request_json
from approval_guard.provider.http.responses import (
    ApiError,
    bad,
    duration,
    json_answer,
    json_object,
    no_unknown,
    query_value,
    read_body,
)
from approval_guard.provider.store.models import (
    Forbidden,
    Grant,
    GrantAlreadyApproved,
    GrantRefused,
    NotPendingError,
    UnknownGrant,
)
from approval_guard.provider.store.sql.grant_tables import MAX_USES, GrantSpec

#: The longest a grant's ``for`` may ask (a tool's ``max_grant`` is the real limit).
MAX_GRANT_SECONDS = 7 * 24 * 3600
#: The most requests one ``apply`` may decide.
MAX_APPLY = 100
_GRANT_KEYS = {"for", "uses", "match", "requested_by"}


def parse_grant(value: object) -> GrantSpec:
    """A decision's ``grant`` object as a :class:`GrantSpec`; 400 for anything malformed."""
    if not isinstance(value, dict):
        raise bad("'grant' must be an object {for, uses, match, requested_by}")
    no_unknown(value, _GRANT_KEYS)
    if "for" not in value:
        raise bad("'grant.for' is required: how long the grant lasts, such as \"1h\"")
    seconds = duration(value["for"], "grant.for", 1, MAX_GRANT_SECONDS)
    uses = value.get("uses")
    if uses is not None and (
        isinstance(uses, bool) or not isinstance(uses, int) or not 1 <= uses <= MAX_USES
    ):
        raise bad(f"'grant.uses' must be null or an integer from 1 to {MAX_USES}")
    match = value.get("match", {})
    if match is None:
        match = {}
    if not isinstance(match, dict):
        raise bad("'grant.match' must be an object of argument names to constraints")
    requested_by = value.get("requested_by", "same")
    if requested_by not in ("same", "any"):
        raise bad("'grant.requested_by' must be 'same' or 'any'")
    return GrantSpec(for_seconds=seconds, uses=uses, match=match, requested_by=str(requested_by))


def grant_json(grant: Grant) -> dict[str, Any]:
    """A grant's wire form (docs/provider-api.md, 1.3)."""
    return {
        "id": grant.id,
        "tool": grant.tool,
        "decision": grant.decision,
        "status": grant.status,
        "match": grant.match,
        "requested_by": grant.requested_by,
        "agent": grant.agent,
        "granted_by": list(grant.granted_by),
        "granted_at": format_timestamp(grant.granted_at),
        "expires_at": format_timestamp(grant.expires_at),
        "uses": grant.uses,
        "uses_left": grant.uses_left,
        "from_request": grant.from_request,
    }


@contextlib.contextmanager
def grant_errors() -> Iterator[None]:
    """The store's refusals about grants, as the API answers them."""
    try:
        yield
    except UnknownGrant:
        raise ApiError(404, "not_found", "no such grant") from None
    except Forbidden as exc:
        raise ApiError(403, "forbidden", str(exc)) from None
    except GrantAlreadyApproved as exc:
        raise ApiError(409, "already_approved", str(exc)) from None
    except GrantRefused as exc:
        raise bad(str(exc)) from None


async def _reviewer(ctx: Context, request: Request) -> Any:
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    return credential


async def list_grants(ctx: Context, request: Request) -> Response:
    """``GET /v1/grants``: live and pending grants; ``?all=1`` with ended ones too."""
    await read_body(request)
    await _reviewer(ctx, request)
    everything = query_value(request, "all")
    if everything not in (None, "", "0", "1", "true", "false"):
        raise bad("'all' must be 1 or 0")
    include = everything in ("1", "true")
    found = await ctx.calls(lambda: ctx.store.list_grants(include_ended=include))
    return json_answer(ctx.store, 200, {"grants": [grant_json(one) for one in found]})


async def show_grant(ctx: Context, request: Request) -> Response:
    """``GET /v1/grants/{id}``."""
    await read_body(request)
    await _reviewer(ctx, request)
    grant_id = request.path_params["grant_id"]
    found = await ctx.calls(lambda: ctx.store.get_grant(grant_id))
    if found is None:
        raise ApiError(404, "not_found", "no such grant")
    out = grant_json(found)
    if found.status == "live":
        with grant_errors():
            pending = await ctx.calls(lambda: ctx.store.pending_covered(grant_id, rules=ctx.rules))
        out = {**out, "covers_pending": pending}
    return json_answer(ctx.store, 200, out)


async def revoke_grant(ctx: Context, request: Request) -> Response:
    """``POST /v1/grants/{id}/revoke`` with ``{"note": ...}`` (optional)."""
    body = await read_body(request)
    credential = await _reviewer(ctx, request)
    obj = json_object(body, allow_empty=True)
    no_unknown(obj, {"note"})
    note = obj.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise bad(f"'note' must be null or a string of at most {MAX_NOTE_CHARS} characters")
    grant_id = request.path_params["grant_id"]
    with grant_errors():
        found = await ctx.calls(
            lambda: ctx.store.revoke_grant(
                grant_id,
                reviewer=credential,
                note=note,
                rules=ctx.rules,
                source=client_source(request),
            )
        )
    return json_answer(ctx.store, 200, grant_json(found))


async def approve_grant(ctx: Context, request: Request) -> Response:
    """``POST /v1/grants/{id}/approve``: one more reviewer's approval of a pending grant."""
    body = await read_body(request)
    credential = await _reviewer(ctx, request)
    no_unknown(json_object(body, allow_empty=True), set())
    grant_id = request.path_params["grant_id"]
    with grant_errors():
        found = await ctx.calls(
            lambda: ctx.store.approve_grant(
                grant_id, reviewer=credential, rules=ctx.rules, source=client_source(request)
            )
        )
    return json_answer(ctx.store, 200, grant_json(found))


async def apply_grant(ctx: Context, request: Request) -> Response:
    """``POST /v1/grants/{id}/apply`` with ``{"ids": [...]}``: decide these pending requests too.

    Only a giver of the grant may, and only for the ids listed (those
    ``GET /v1/grants/{id}`` showed as ``covers_pending``); each is decided as a
    covered create would be, its use counted. Answers ``{"results": [...]}`` in
    the order given, a refused id never stopping the others.
    """
    body = await read_body(request)
    credential = await _reviewer(ctx, request)
    obj = json_object(body)
    no_unknown(obj, {"ids"})
    ids = obj.get("ids")
    if (
        not isinstance(ids, list)
        or not ids
        or len(ids) > MAX_APPLY
        or not all(isinstance(one, str) and one for one in ids)
    ):
        raise bad(f"'ids' must be a list of 1 to {MAX_APPLY} request ids")
    if len(set(ids)) != len(ids):
        raise bad("'ids' lists a request twice")
    grant_id = request.path_params["grant_id"]
    source = client_source(request)

    def one(request_id: str) -> dict[str, Any]:
        try:
            with grant_errors():
                decided = ctx.store.apply_grant(
                    grant_id, request_id, reviewer=credential, rules=ctx.rules, source=source
                )
        except ApiError as exc:
            return {"id": request_id, "error": {"type": exc.kind, "message": str(exc)}}
        except NotPendingError as exc:
            return {
                "id": request_id,
                "error": {
                    "type": "not_pending",
                    "message": f"the request is {exc.request.status}, not pending",
                },
            }
        return {"id": request_id, "status": decided.status, "request": request_json(decided)}

    results = [await ctx.calls(one, request_id) for request_id in ids]
    return json_answer(ctx.store, 200, {"results": results})
