"""The review page: sign-in by a same-site form, the page, its files, decisions and grants."""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from approval_guard._codec.display import escape, escape_lines
from approval_guard._codec.exact_json import InvalidJSON, load_json
from approval_guard._codec.wire import APPROVED
from approval_guard.provider.http.api import client_source
from approval_guard.provider.http.auth import authenticate, require_reviewer, session_of
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.decisions import decision_fields, record_decision
from approval_guard.provider.http.grants import grant_json, parse_grant
from approval_guard.provider.http.limits import (
    CONTENT_TYPES,
    CSRF_PLACEHOLDER,
    HTML_HEADERS,
    SESSION_COOKIE,
    STATIC_DIR,
    STATIC_NAME,
)
from approval_guard.provider.http.render import input_json
from approval_guard.provider.http.responses import (
    ApiError,
    answer,
    bad,
    header,
    html_answer,
    json_answer,
    json_object,
    not_found,
    read_body,
)
from approval_guard.provider.rules.checks import refusal
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.rules.grant_words import (
    constraint_kinds,
    default_duration,
    grant_durations,
    grant_words,
    requested_by_words,
)
from approval_guard.provider.rules.scope import ANY, SAME, describe
from approval_guard.provider.store.checks import with_edits
from approval_guard.provider.store.models import Grant, InvalidEdit, StoredRequest
from approval_guard.provider.store.sql.grant_tables import GRANT_PENDING, GrantSpec

#: The most grants ``GET /review/grants`` lists (newest first).
MAX_PAGE_GRANTS = 200
#: How deep a constraint the page sends as JSON text may nest (``{"in": [...]}``).
_CONSTRAINT_DEPTH = 3


def _static_bytes(name: str) -> bytes:
    return (STATIC_DIR / name).read_bytes()


async def page(ctx: Context, request: Request) -> Response:
    """``GET /``: a token link's sign-in button, the login form, or the page.

    ``/?token=`` signs nobody in: a GET can come from any site (a link, an
    image), so it only shows a page whose button posts the token (see
    :func:`sign_in`). That keeps the printed link one click from the page.
    """
    await read_body(request)
    store = ctx.store
    tokens = request.query_params.getlist("token")
    if tokens:
        wanted = request.query_params.get("request")
        hidden = (
            ""
            if not wanted
            else f'<input name="request" type="hidden" value="{html.escape(wanted)}">'
        )
        body = (
            _static_bytes("signin.html")
            .replace(b"{{TOKEN}}", html.escape(tokens[0].strip()).encode())
            .replace(b"{{REQUEST}}", hidden.encode())
        )
        return html_answer(store, 200, body)  # no-store, as every answer
    found = await session_of(store, request)
    if found is None:
        return html_answer(store, 200, _static_bytes("login.html"))
    ctx.page_served = True
    body = _static_bytes("review.html").replace(
        CSRF_PLACEHOLDER.encode(), found[1].csrf_token.encode()
    )
    return html_answer(store, 200, body)


_FORM = "application/x-www-form-urlencoded"


def same_site(request: Request) -> bool:
    """Whether a browser says this request comes from the provider's own pages.

    ``Sec-Fetch-Site`` when sent (it must be ``same-origin``), else ``Origin``
    (it must be this very origin). A client that sends neither is no browser
    acting for another site (every browser sends ``Origin`` on a form POST).
    """
    fetch_site = header(request, "sec-fetch-site")
    if fetch_site is not None:
        return fetch_site == "same-origin"
    origin = header(request, "origin")
    if origin is None:
        return True
    host = header(request, "host")
    return host is not None and origin in (f"http://{host}", f"https://{host}")


async def sign_in(ctx: Context, request: Request) -> Response:
    """``POST /``: sign in with the form's ``token``, from the provider's own pages only.

    A cross-site post is 403 and signs nobody in; a bad token is 401 with the
    login form; else 303 to the page (or ``/?request=<id>``) with an HttpOnly,
    SameSite=Strict session cookie, the token gone from the address bar.
    """
    body = await read_body(request)
    store = ctx.store
    if not same_site(request):
        return html_answer(store, 403, _static_bytes("login.html"))
    kind = (header(request, "content-type") or "").split(";")[0].strip().lower()
    try:
        fields = parse_qsl(
            body.decode("utf-8"), keep_blank_values=True, strict_parsing=True, max_num_fields=2
        )
    except (UnicodeDecodeError, ValueError):
        fields = []
    names = [name for name, _ in fields]
    if kind != _FORM or names.count("token") != 1 or set(names) - {"token", "request"}:
        raise bad(f"sign in by posting the form's token ({_FORM})")
    values = dict(fields)
    credential = await run_in_threadpool(store.authenticate, values["token"].strip())
    if credential is None or not credential.is_reviewer:
        return html_answer(store, 401, _static_bytes("login.html"))
    session_id, session = await run_in_threadpool(store.create_session, credential)
    max_age = int(session.expires_at.timestamp() - store.now().timestamp())
    cookie = f"{SESSION_COOKIE}={session_id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}"
    # A link to one request (a webhook's ?request=<id>) keeps pointing at it.
    wanted = values.get("request")
    # Relative (to "/", this page): kept under a reverse proxy's path prefix.
    location = "./" if not wanted else f"./?request={quote(wanted, safe='')}"
    return html_answer(
        store,
        303,
        b'<!doctype html><title>Signed in</title><a href="./">Continue</a>',
        (("Set-Cookie", cookie), ("Location", location)),
    )


_TEMPLATES = frozenset({"review.html", "signin.html"})


async def static(ctx: Context, request: Request) -> Response:
    """``GET /static/{name}``: the page's scripts and styles (never the raw page template)."""
    await read_body(request)
    name = request.path_params["name"]
    if not STATIC_NAME.fullmatch(name) or ".." in name or name in _TEMPLATES:
        # Only GET / fills in the CSRF token or the link's token; raw templates are never served.
        raise not_found("no such file")
    path = STATIC_DIR / name
    if not path.is_file():
        raise not_found("no such file")
    content_type = CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
    return answer(ctx.store, 200, path.read_bytes(), content_type, HTML_HEADERS)


async def review_decide(ctx: Context, request: Request) -> Response:
    """The page's decision: edits come as JSON texts, parsed here exactly, never in JS.

    ``{"status", "note", "valid_for", "edits": {name: json_text}}``: the page
    cannot parse numbers exactly, so it sends what the reviewer typed and the
    server builds the whole arguments object with :func:`with_edits`.
    """
    body = await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    obj = json_object(body)
    fields = decision_fields(obj, {"edits", "grant"})
    grant = None if obj.get("grant") is None else page_grant(obj["grant"])
    edits = obj.get("edits")
    if edits is not None and (
        not isinstance(edits, dict) or not all(isinstance(v, str) for v in edits.values())
    ):
        raise bad("'edits' must map argument names to JSON texts")
    request_id = request.path_params["request_id"]
    arguments = None
    if edits:
        if fields[0] != APPROVED:
            raise bad("a denial cannot carry edits: only an approval can edit")
        current = await run_in_threadpool(ctx.store.get_request, request_id)
        if current is None:
            raise ApiError(404, "not_found", "no such request")
        try:
            arguments = with_edits(current, edits)
        except InvalidEdit as exc:
            raise bad(str(exc)) from None
    return await record_decision(
        ctx,
        request_id,
        credential,
        fields,
        arguments,
        client_source(request),
        channel="page",
        grant=grant,
    )


def page_grant(value: object) -> GrantSpec:
    """The page's ``grant``: the API's, except that ``match_texts`` may stand for ``match``.

    ``{"for", "uses", "requested_by", "match_texts": {name: json_text}}``: like
    edits, each constraint comes as the JSON text the page built from what the
    reviewer typed (``{"min": 1, "max": 5000}``), parsed here exactly, so a
    bound never passes through a JavaScript number. Then checked as the API's.
    """
    if not isinstance(value, dict) or "match_texts" not in value:
        return parse_grant(value)
    if "match" in value:
        raise bad("a grant has 'match' or 'match_texts', not both")
    texts = value["match_texts"]
    if not isinstance(texts, dict) or not all(isinstance(one, str) for one in texts.values()):
        raise bad("'grant.match_texts' must map argument names to JSON texts")
    match: dict[str, Any] = {}
    for name, text in texts.items():
        try:
            match[name] = load_json(text, max_depth=_CONSTRAINT_DEPTH)
        except InvalidJSON as exc:
            raise bad(f"the scope of {escape(name)!r} is not JSON ({exc})") from None
    rest = {key: one for key, one in value.items() if key != "match_texts"}
    return parse_grant({**rest, "match": match})


def grant_display(grant: Grant) -> dict[str, Any]:
    """Every text the page shows of a grant, escaped: made here, never in the page's JS."""
    out: dict[str, Any] = {
        "tool": escape(grant.tool),
        "agent": escape(grant.agent),
        "granted_by": escape(", ".join(grant.granted_by)),
        "scope": [escape(line) for line in grant_words(grant)],
        "note": None if grant.note is None else escape_lines(grant.note),
    }
    if grant.status == GRANT_PENDING:
        out["approvals"] = escape(
            f"{len(grant.granted_by)} of {grant.approvals_required} approvals: "
            + ", ".join(grant.granted_by)
        )
    return out


async def review_grants(ctx: Context, request: Request) -> Response:
    """``GET /review/grants``: the newest live and pending grants with ``display`` texts.

    At most :data:`MAX_PAGE_GRANTS` of them (``total`` says how many there are):
    the page re-reads this on every change, and a provider may hold thousands.
    """
    await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    found = await ctx.calls(ctx.store.list_grants)
    grants = [{**grant_json(one), "display": grant_display(one)} for one in found[:MAX_PAGE_GRANTS]]
    return json_answer(ctx.store, 200, {"grants": grants, "total": len(found)})


def grant_offer(request: StoredRequest, rule: ToolRule) -> dict[str, Any]:
    """What the page's "Approve, and allow calls like this for …" offers (API 1.3 grants).

    ``durations`` within the tool's ``max_grant`` (``default`` preselected);
    per argument (sorted by name) ``key`` (the name to send), ``name`` (shown),
    ``kinds`` (the constraints it may take, see :func:`constraint_kinds`),
    ``same`` and ``any`` (those two in words) and ``text`` (its exact JSON, to
    prefill a range, a list or a prefix; null for a redacted value); and the
    words for ``requested_by`` ``same`` and ``any``. Every text is escaped.
    """
    arguments = []
    for key in sorted(request.arguments):
        value = request.arguments[key]
        kinds = constraint_kinds(value)
        arguments.append(
            {
                "key": key,
                "name": escape(key),
                "kinds": kinds,
                "same": escape(describe({key: SAME}, request.arguments)[0]),
                "any": escape(describe({key: ANY}, None)[0]),
                "text": input_json(value) if len(kinds) > 2 else None,
            }
        )
    return {
        "durations": grant_durations(rule.max_grant),
        "default": default_duration(rule.max_grant),
        "arguments": arguments,
        "requested_by": {
            "same": escape(requested_by_words(SAME, request.requested_by)),
            "any": escape(requested_by_words(ANY, None)),
        },
    }


async def review_grant_offer(ctx: Context, request: Request) -> Response:
    """``GET /review/requests/{id}/grant-offer``: what "Approve, and allow …" may offer.

    ``{"offer": {...}}`` (see :func:`grant_offer`), or ``{"offer": null,
    "reason": ...}`` when the tool's rule turns grants off; ``403`` when this
    reviewer may not decide the request, ``409 not_pending`` once it is decided.
    """
    await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    require_reviewer(credential)
    request_id = request.path_params["request_id"]
    current = await ctx.calls(ctx.store.get_request, request_id)
    if current is None:
        raise ApiError(404, "not_found", "no such request")
    if not current.is_pending:
        raise ApiError(409, "not_pending", f"the request is {current.status}, not pending")
    rule = ctx.rules.for_tool(current.tool)
    why = refusal(current, rule, credential)
    if why is not None:
        raise ApiError(403, "forbidden", escape(why))
    if not rule.grants:
        reason = f"standing grants are turned off for {current.tool} (grants = false)"
        return json_answer(ctx.store, 200, {"offer": None, "reason": escape(reason)})
    return json_answer(ctx.store, 200, {"offer": grant_offer(current, rule)})
