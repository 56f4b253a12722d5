"""Who is asking: a bearer credential, or a review-page session with its CSRF token.

A session cookie alone may come from a cross-site form; only our own page can
read the CSRF token to put it in the ``X-CSRF-Token`` header, so a cookie
without the right header is refused.
"""

from __future__ import annotations

import hmac

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from approval_guard.provider.http.limits import CSRF_HEADER, SESSION_COOKIE
from approval_guard.provider.http.responses import ApiError, header
from approval_guard.provider.store.models import Credential, Session
from approval_guard.provider.store.protocol import StoreProtocol


async def session_of(store: StoreProtocol, request: Request) -> tuple[str, Session] | None:
    """``(session id, session)`` of the request's live review session cookie, or None."""
    session_id = request.cookies.get(SESSION_COOKIE)
    if not session_id:
        return None
    session = await run_in_threadpool(store.session, session_id)
    return None if session is None else (session_id, session)


def bearer_token(request: Request) -> str | None:
    """The request's bearer token; None without an ``Authorization`` header; 401 for another."""
    value = header(request, "authorization")
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    raise ApiError(401, "unauthorized", "missing or invalid bearer credential")


def authenticated(store: StoreProtocol, token: str) -> Credential:
    """Blocking (a worker thread's): the live credential of a bearer token; 401 if none."""
    credential = store.authenticate(token)
    if credential is None:
        raise ApiError(401, "unauthorized", "missing or invalid bearer credential")
    return credential


async def authenticate(store: StoreProtocol, request: Request) -> Credential:
    """The live credential behind this request; 401 (or 403 for a bad CSRF token) if none."""
    token = bearer_token(request)
    if token is not None:
        return await run_in_threadpool(authenticated, store, token)
    found = await session_of(store, request)
    if found is not None:
        csrf = header(request, CSRF_HEADER) or ""
        if not hmac.compare_digest(csrf.encode(), found[1].csrf_token.encode()):
            raise ApiError(403, "forbidden", f"the {CSRF_HEADER} header is missing or wrong")
        return found[1].credential
    raise ApiError(401, "unauthorized", "missing or invalid bearer credential")


def require_reviewer(credential: Credential) -> None:
    if not credential.is_reviewer:
        raise ApiError(403, "forbidden", "this needs a reviewer credential")


def require_instance(credential: Credential) -> None:
    if credential.is_reviewer:
        raise ApiError(403, "forbidden", "this needs an instance credential")
