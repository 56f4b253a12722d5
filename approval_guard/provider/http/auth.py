"""Who is asking: a bearer credential, or a review-page session with its CSRF token.

A session cookie alone may come from a cross-site form; only our own page can
read the CSRF token to put it in the ``X-CSRF-Token`` header, so a cookie
without the right header is refused.

A create must know its credential before it reads the body (to claim its
key): :class:`CredentialHints` remembers which credential a bearer token
named, for those early checks only; the create's one trip to the thread pool
looks the token up again with the write, so a credential revoked a moment
ago, by this process or another, is refused then and there.
"""

from __future__ import annotations

import hashlib
import hmac
import threading

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from approval_guard.provider.http.limits import CSRF_HEADER, SESSION_COOKIE
from approval_guard.provider.http.responses import ApiError, header
from approval_guard.provider.http.store_calls import StoreCall
from approval_guard.provider.store.models import Credential, Session
from approval_guard.provider.store.protocol import StoreProtocol


async def session_of(
    store: StoreProtocol, request: Request, *, calls: StoreCall = run_in_threadpool
) -> tuple[str, Session] | None:
    """``(session id, session)`` of the request's live review session cookie, or None.

    ``calls`` runs the store's read (the context's ``StoreCalls``, or a worker thread).
    """
    session_id = request.cookies.get(SESSION_COOKIE)
    if not session_id:
        return None
    session = await calls(store.session, session_id)
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


async def authenticate(
    store: StoreProtocol, request: Request, *, calls: StoreCall = run_in_threadpool
) -> Credential:
    """The live credential behind this request; 401 (or 403 for a bad CSRF token) if none.

    ``calls`` runs the store's read (the context's ``StoreCalls``, or a worker thread).
    """
    token = bearer_token(request)
    if token is not None:
        return await calls(authenticated, store, token)
    found = await session_of(store, request, calls=calls)
    if found is not None:
        csrf = header(request, CSRF_HEADER) or ""
        if not hmac.compare_digest(csrf.encode(), found[1].csrf_token.encode()):
            raise ApiError(403, "forbidden", f"the {CSRF_HEADER} header is missing or wrong")
        return found[1].credential
    raise ApiError(401, "unauthorized", "missing or invalid bearer credential")


class CredentialHints:
    """Which credential each recently seen bearer token named, by the token's digest.

    Only for checks made before a request's trip to the store (its kind, the
    key it claims); never the last word on whether the credential is live.
    Holds at most ``size`` tokens (all forgotten when full), never a token itself.
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._known: dict[bytes, Credential] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _digest(token: str) -> bytes:
        return hashlib.sha256(token.encode("utf-8")).digest()

    def get(self, token: str) -> Credential | None:
        return self._known.get(self._digest(token))

    def remember(self, token: str, credential: Credential) -> None:
        with self._lock:
            if len(self._known) >= self._size:
                self._known.clear()
            self._known[self._digest(token)] = credential

    def forget(self, token: str) -> None:
        with self._lock:
            self._known.pop(self._digest(token), None)


async def authenticate_early(
    store: StoreProtocol,
    hints: CredentialHints,
    request: Request,
    *,
    calls: StoreCall = run_in_threadpool,
) -> Credential:
    """:func:`authenticate`, but a bearer token seen before costs no trip to the store.

    The credential may have been revoked since: the caller looks the token up
    again (:func:`authenticated_again`) in the trip that writes.
    """
    token = bearer_token(request)
    if token is None:
        return await authenticate(store, request, calls=calls)
    known = hints.get(token)
    if known is None:
        known = await calls(authenticated, store, token)
        hints.remember(token, known)
    return known


def authenticated_again(
    store: StoreProtocol, hints: CredentialHints, request: Request, early: Credential
) -> Credential:
    """Blocking: after :func:`authenticate_early`, the credential as live as the write to come.

    A token no longer live is forgotten and refused (401). A review session
    was read from the store just now, so it is not read again.
    """
    token = bearer_token(request)
    if token is None:
        return early
    try:
        credential = authenticated(store, token)
    except ApiError:
        hints.forget(token)
        raise
    if credential.id != early.id:  # pragma: no cover - a token names one credential for good
        hints.forget(token)
        raise ApiError(401, "unauthorized", "missing or invalid bearer credential")
    return credential


def require_reviewer(credential: Credential) -> None:
    if not credential.is_reviewer:
        raise ApiError(403, "forbidden", "this needs a reviewer credential")


def require_instance(credential: Credential) -> None:
    if credential.is_reviewer:
        raise ApiError(403, "forbidden", "this needs an instance credential")
