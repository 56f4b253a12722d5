"""The review page: sign-in by a same-site form, the page, its files and its decision endpoint."""

from __future__ import annotations

import html
from urllib.parse import parse_qsl, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from approval_guard._codec.wire import APPROVED
from approval_guard.provider.http.api import client_source
from approval_guard.provider.http.auth import authenticate, require_reviewer, session_of
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.decisions import decision_fields, record_decision
from approval_guard.provider.http.limits import (
    CONTENT_TYPES,
    CSRF_PLACEHOLDER,
    HTML_HEADERS,
    SESSION_COOKIE,
    STATIC_DIR,
    STATIC_NAME,
)
from approval_guard.provider.http.responses import (
    ApiError,
    answer,
    bad,
    header,
    html_answer,
    json_object,
    not_found,
    read_body,
)
from approval_guard.provider.store.checks import with_edits
from approval_guard.provider.store.models import InvalidEdit


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
    location = "/" if not wanted else f"/?request={quote(wanted, safe='')}"
    return html_answer(
        store,
        303,
        b'<!doctype html><title>Signed in</title><a href="/">Continue</a>',
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
    fields = decision_fields(obj, {"edits"})
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
        ctx, request_id, credential, fields, arguments, client_source(request), channel="page"
    )
