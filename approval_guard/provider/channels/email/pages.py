"""The pages an email link opens: a confirmation (``GET``, decides nothing) and its ``POST``.

``GET /email/requests/{id}?token=...`` checks the link and shows the call as
the review page shows it, with one button; mail scanners and link previews
fetch links, so a ``GET`` never decides. The button posts the token in the
form body to ``POST /email/requests/{id}/decision``, which checks the link
again and records the decision through
:func:`~approval_guard.provider.http.decisions.apply_granting_decision`,
the API's and the page's own path (the same rules, quorum, ``max_valid_for``
and audit rows, ``channel`` ``"email"``), marking the link used in the same
transaction. Every refusal is an HTML page with a 4xx status that says why;
no token ever reaches a log line, and the pages send no referrer and refuse
to be framed.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qsl, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from approval_guard._codec.display import escape
from approval_guard._codec.duration import check_duration_text
from approval_guard._codec.wire import APPROVED, format_timestamp
from approval_guard.provider.channels.base import AGENT_SAYS, VOIDED
from approval_guard.provider.channels.links import DENY, Link, LinkRefused, read_token
from approval_guard.provider.http.api import client_source
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.decisions import apply_granting_decision
from approval_guard.provider.http.limits import MAX_NOTE_CHARS
from approval_guard.provider.http.render import listed_request_json
from approval_guard.provider.http.responses import ApiError, answer, header, read_body, to_root
from approval_guard.provider.rules.checks import refusal
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.rules.grant_words import (
    grant_durations,
    same_scope_words,
)
from approval_guard.provider.store.models import Credential, Grant, StoredRequest
from approval_guard.provider.store.sql.grant_tables import MAX_USES, GrantSpec

_CSP = (
    "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
HEADERS = (
    ("Content-Security-Policy", _CSP),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("X-Robots-Tag", "noindex, nofollow"),
)
_FORM = "application/x-www-form-urlencoded"


def _page(
    ctx: Context, request: Request, status: int, title: str, body: str, *, state: str
) -> Response:
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="{to_root(request)}static/email.css"></head>'
        f'<body><main data-testid="email-page" data-state="{state}">'
        f"<h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )
    return answer(ctx.store, status, text.encode("utf-8"), "text/html; charset=utf-8", HEADERS)


def _refused(ctx: Context, request: Request, status: int, message: str) -> Response:
    return _page(
        ctx,
        request,
        status,
        "This link decides nothing",
        f'<p data-testid="reason">{html.escape(message)}</p>',
        state="refused",
    )


def _check(ctx: Context, request_id: str, token: object) -> tuple[Link, Credential, StoredRequest]:
    """The link, its live reviewer and the request; :class:`LinkRefused` for anything else."""
    store = ctx.store
    link = read_token(store.link_secret(), token, request_id=request_id, now=store.now())
    if store.link_used(link.mail_id):
        raise LinkRefused(409, "this mail's links have already been used: a mail decides once")
    reviewer = store.credential(link.reviewer_id)
    if reviewer is None or reviewer.revoked_at is not None or not reviewer.is_reviewer:
        raise LinkRefused(403, "the reviewer this link was sent to is no longer a reviewer")
    voided = store.outbox_state(link.mail_id) == VOIDED
    if store.identities("email").get(reviewer.id) != link.address or voided:
        raise LinkRefused(403, "this link was sent to an address that is no longer the reviewer's")
    request = store.get_request(request_id)
    if request is None:
        raise LinkRefused(404, "no such request")
    if not request.is_pending:
        raise LinkRefused(409, f"the request is {request.status} already: it is not pending")
    return link, reviewer, request


def _call(ctx: Context, request: StoredRequest, reviewer: Credential) -> str:
    """The call as the review page shows it, as HTML."""
    display = listed_request_json(request, viewer=reviewer, rule=ctx.rules.for_tool(request.tool))[
        "display"
    ]
    parts = [f'<p>Tool: <code data-testid="tool">{html.escape(display["tool"])}</code></p>']
    if request.requested_by is not None:
        who = escape(request.requested_by)
        parts.append(
            f'<p>Asked for by <span data-testid="requested-by">{html.escape(who)}</span></p>'
        )
    if display.get("context") is not None:
        # The agent's own words (API 1.3), above the arguments; display texts are escaped.
        parts.append(
            f'<p>{AGENT_SAYS}</p><blockquote data-testid="context">'
            f"<pre>{html.escape(display['context'])}</pre></blockquote>"
        )
    parts.append(f'<pre data-testid="arguments">{html.escape(display["arguments"])}</pre>')
    if display.get("redacted"):
        hidden = ", ".join(display["redacted"])
        parts.append(f'<p data-testid="redacted">Redacted by the guard: {html.escape(hidden)}</p>')
    if display.get("approvals"):
        parts.append(f'<p data-testid="approvals">{html.escape(display["approvals"])}</p>')
    parts.append(f"<p>Decide before {format_timestamp(request.deadline_at)}.</p>")
    return "\n".join(parts)


def _why_not(ctx: Context, request: StoredRequest, reviewer: Credential, link: Link) -> str | None:
    """Why this reviewer may not make this link's decision (what the POST would refuse)."""
    why = refusal(request, ctx.rules.for_tool(request.tool), reviewer, link.decision)
    mine = any(one.by == reviewer.name for one in request.approvals)
    if why is None and link.decision == APPROVED and mine:
        why = "you have already approved this request"
    return why


async def confirm(ctx: Context, request: Request) -> Response:
    """``GET /email/requests/{id}?token=``: show the call and one button; decide nothing."""
    await read_body(request)
    request_id = request.path_params["request_id"]
    tokens = request.query_params.getlist("token")
    try:
        if len(tokens) != 1:
            raise LinkRefused(400, "this link is not valid: it has no token (copy the whole link)")
        link, reviewer, current = await run_in_threadpool(_check, ctx, request_id, tokens[0])
    except LinkRefused as exc:
        return _refused(ctx, request, exc.status, exc.message)
    call = _call(ctx, current, reviewer)
    why = _why_not(ctx, current, reviewer, link)
    verb = "Deny" if link.action == DENY else "Approve"
    who = html.escape(f"{escape(reviewer.name)} ({link.address})")
    if why is not None:
        form = f'<p data-testid="reason">You may not {verb.lower()} this: {html.escape(why)}</p>'
    else:
        action = f"{to_root(request)}email/requests/{quote(request_id, safe='')}/decision"
        form = (
            f'<form method="post" action="{html.escape(action)}">'
            f'<input type="hidden" name="token" value="{html.escape(tokens[0])}">'
            f'<label>Note (optional)<textarea name="note" maxlength="{MAX_NOTE_CHARS}" '
            'data-testid="note"></textarea></label>'
            + (grant_fields(current, ctx.rules.for_tool(current.tool)) if verb == "Approve" else "")
            + f'<button type="submit" data-testid="confirm">{verb}</button></form>'
        )
    body = f"<p>You, {who}, are about to <strong>{verb.lower()}</strong> this call.</p>"
    return _page(ctx, request, 200, f"{verb} this call?", body + call + form, state="confirm")


def _fields(body: bytes) -> dict[str, str]:
    """The confirmation form's fields: the token once, at most a note and the grant's fields."""
    try:
        fields = parse_qsl(
            body.decode("utf-8"), keep_blank_values=True, strict_parsing=True, max_num_fields=6
        )
    except (UnicodeDecodeError, ValueError):
        raise LinkRefused(400, "the form could not be read") from None
    names = [name for name, _ in fields]
    optional = ("note", *_GRANT_FIELDS)
    if (
        names.count("token") != 1
        or any(names.count(one) > 1 for one in optional)
        or set(names) - {"token", *optional}
    ):
        raise LinkRefused(400, "the form must carry the link's token once, and at most a note")
    return dict(fields)


def _form(body: bytes) -> tuple[str, str | None]:
    """``(token, note)`` of the confirmation's form; :class:`LinkRefused` for anything else."""
    values = _fields(body)
    if set(values) & set(_GRANT_FIELDS):
        raise LinkRefused(400, "the form must carry the link's token once, and at most a note")
    note = values.get("note") or None
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise LinkRefused(400, f"a note is at most {MAX_NOTE_CHARS} characters")
    return values["token"], note


async def decide(ctx: Context, request: Request) -> Response:
    """``POST /email/requests/{id}/decision``: the confirmation's button records the decision."""
    body = await read_body(request)
    request_id = request.path_params["request_id"]
    try:
        kind = (header(request, "content-type") or "").split(";")[0].strip().lower()
        if kind != _FORM:
            raise LinkRefused(400, f"the decision must be posted as {_FORM} (the page's form)")
        values = _fields(body)
        if set(values) & set(_GRANT_FIELDS):
            return await _decide_granting(ctx, request, request_id, values)
        token, note = _form(body)
        link, reviewer, _ = await run_in_threadpool(_check, ctx, request_id, token)
    except LinkRefused as exc:
        return _refused(ctx, request, exc.status, exc.message)
    return await _record(ctx, request, request_id, link, reviewer, note, None)


async def _record(
    ctx: Context,
    request: Request,
    request_id: str,
    link: Link,
    reviewer: Credential,
    note: str | None,
    grant: GrantSpec | None,
) -> Response:
    """The link's decision (and the grant it gives) through the one decision path; its page."""
    try:
        found, given = await apply_granting_decision(
            ctx,
            request_id,
            reviewer,
            (link.decision, note, None),
            client_source(request),
            channel="email",
            channel_user=link.address,
            use_once=link.mail_id,
            grant=grant,
        )
    except ApiError as err:
        return _refused(ctx, request, err.status, err.message)
    if found is None:
        return _refused(ctx, request, 404, "no such request")
    return _decided_page(ctx, request, found, given)


def _decided_page(
    ctx: Context, request: Request, found: StoredRequest, given: Grant | None = None
) -> Response:
    if found.status == APPROVED:
        title, text = "Approved", "The call may now run."
    elif found.is_pending:
        title = "Approval counted"
        text = f"{len(found.approvals)} of {found.approvals_required} approvals so far."
    else:
        title, text = "Denied", "The call will not run."
    body = f'<p data-testid="result">{html.escape(text)}</p>'
    if given is not None:
        body += grant_given(given)
    return _page(ctx, request, 200, title, body, state="done")


# ---------------------------------------------------------------- standing grants (API 1.3)

#: The approve form's grant fields: a duration (empty: no grant) and optional uses.
_GRANT_FIELDS = ("grant_for", "grant_uses")


def grant_fields(request: StoredRequest, rule: ToolRule) -> str:
    """The approve form's "and allow calls like this for …" choice (HTML; none if grants are off).

    Kept simple and safe: exactly the same arguments, for the same person, from
    the same agent; the review page offers wider scopes.
    """
    if not rule.grants:
        return ""
    options = "".join(
        f'<option value="{html.escape(one)}">{html.escape(one)}</option>'
        for one in grant_durations(rule.max_grant)
    )
    words = "".join(f"<li>{html.escape(escape(line))}</li>" for line in same_scope_words(request))
    return (
        '<fieldset data-testid="grant"><legend>And allow calls like this?</legend>'
        "<label>Also approve at once, for "
        '<select name="grant_for" data-testid="grant-for">'
        f'<option value="" selected>no: only this call</option>{options}</select>, '
        f'the calls where:</label><ul data-testid="grant-words">{words}</ul>'
        '<label>At most this many calls (optional) <input name="grant_uses" '
        'inputmode="numeric" maxlength="7" data-testid="grant-uses"></label></fieldset>'
    )


def grant_given(grant: Grant) -> str:
    """The result page's line about the grant just given (HTML)."""
    uses = "" if grant.uses is None else f", for at most {grant.uses} calls"
    waiting = (
        f" It covers nothing until {grant.approvals_required} reviewers have approved it."
        if grant.status == "pending"
        else ""
    )
    text = (
        f"Standing grant {grant.id} approves calls like this one until "
        f"{format_timestamp(grant.expires_at)}{uses}.{waiting} Revoke it on the review page."
    )
    return f'<p data-testid="grant-given">{html.escape(text)}</p>'


def _grant_spec(values: dict[str, str], rule: ToolRule) -> GrantSpec | None:
    """The form's grant, or None when none was chosen; :class:`LinkRefused` for a bad one."""
    chosen = values.get("grant_for") or ""
    typed = (values.get("grant_uses") or "").strip()
    if not chosen:
        if typed:
            raise LinkRefused(400, "choose how long to allow calls like this, or leave uses empty")
        return None
    try:
        seconds = check_duration_text(chosen, "the grant's duration", 1, rule.max_grant)
    except ValueError as exc:
        raise LinkRefused(400, str(exc)) from None
    uses = None
    if typed:
        if not typed.isascii() or not typed.isdigit() or not 1 <= int(typed) <= MAX_USES:
            raise LinkRefused(400, f"uses must be a whole number from 1 to {MAX_USES}, or empty")
        uses = int(typed)
    return GrantSpec(for_seconds=seconds, uses=uses, match={}, requested_by="same")


async def _decide_granting(
    ctx: Context, request: Request, request_id: str, values: dict[str, str]
) -> Response:
    """The approve form with a grant: the link checked again, then the one decision path."""
    token = values["token"]
    note = values.get("note") or None
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise LinkRefused(400, f"a note is at most {MAX_NOTE_CHARS} characters")
    link, reviewer, current = await run_in_threadpool(_check, ctx, request_id, token)
    spec = _grant_spec(values, ctx.rules.for_tool(current.tool))
    if spec is not None and link.decision != APPROVED:
        raise LinkRefused(400, "only an approval may allow calls like this")
    return await _record(ctx, request, request_id, link, reviewer, note, spec)
