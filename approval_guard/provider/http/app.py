"""The provider as an ASGI app: the route table, errors in the API's shape, and its lifespan.

Each path maps its methods to handlers (``ROUTES``); a known path with another
method is ``405`` with an ``Allow`` header naming exactly those methods, an
unknown path is ``404 not_found``, and nothing a client sends is ever a 500
(an unexpected error is logged, without the request's values, and answered
``500 internal_error``). The lifespan makes the loop's :class:`Notifier`
and runs the expiry task, which writes each deadline's expiry when it passes
even if nobody polls (so the review page's change feed hears of it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from approval_guard.provider.channels.base import Backoff, Channel
from approval_guard.provider.http import api, decisions, grants, wait_many
from approval_guard.provider.http import page as review
from approval_guard.provider.http.context import Context, Handler
from approval_guard.provider.http.responses import ApiError, check_head, error_answer
from approval_guard.provider.http.store_calls import StoreCalls
from approval_guard.provider.http.waits import Notifier
from approval_guard.provider.rules.config import NO_RULES, Rules
from approval_guard.provider.store.models import StoreClosedError
from approval_guard.provider.store.protocol import StoreProtocol

logger = logging.getLogger("approval_guard.provider")

#: Path -> {method: handler}. Starlette matches the path; the method is ours to check.
#: Starlette tries them in order, so the busiest come first (no two paths overlap, but
#: ``/v1/requests/wait`` must come before ``/v1/requests/{request_id}``).
ROUTES: tuple[tuple[str, Mapping[str, Handler]], ...] = (
    # Before the next: "wait" is no request id (ours are UUIDs), so nothing is shadowed.
    ("/v1/requests/wait", {"POST": wait_many.wait}),
    ("/v1/requests/{request_id}", {"GET": api.poll}),
    ("/v1/requests", {"GET": api.list_requests, "POST": api.create}),
    ("/v1/requests/{request_id}/decision", {"POST": decisions.decide}),
    ("/v1/requests/{request_id}/cancel", {"POST": api.cancel}),
    ("/v1/events", {"GET": api.events}),
    ("/", {"GET": review.page, "POST": review.sign_in}),
    ("/static/{name}", {"GET": review.static}),
    ("/v1/requests/{request_id}/history", {"GET": api.history}),
    ("/review/requests/{request_id}/decision", {"POST": review.review_decide}),
    ("/review/grants", {"GET": review.review_grants}),
    ("/review/requests/{request_id}/grant-offer", {"GET": review.review_grant_offer}),
    ("/v1/grants", {"GET": grants.list_grants}),
    ("/v1/grants/{grant_id}", {"GET": grants.show_grant}),
    ("/v1/grants/{grant_id}/revoke", {"POST": grants.revoke_grant}),
    ("/v1/grants/{grant_id}/approve", {"POST": grants.approve_grant}),
    ("/v1/grants/{grant_id}/apply", {"POST": grants.apply_grant}),
    ("/v1/decisions", {"POST": decisions.decide_many}),
)

#: Header names as the API documents them (Starlette lowercases; some clients compare exactly).
_CASED = {
    b"x-request-id": b"X-Request-ID",
    b"www-authenticate": b"WWW-Authenticate",
    # uvicorn looks for exactly b"connection: close" to end a keep-alive connection.
    b"connection": b"connection",
}


@functools.lru_cache(maxsize=256)
def cased(name: bytes) -> bytes:
    """``content-type`` -> ``Content-Type`` (and the documented spellings above)."""
    known = _CASED.get(name)
    if known is not None:
        return known
    return b"-".join(part[:1].upper() + part[1:] for part in name.split(b"-"))


#: How long the expiry task rests after a change before it looks again.
_EXPIRY_REST = 0.25


def context_of(app: Any) -> Context:
    ctx: Context = app.state.ctx
    return ctx


class _Endpoint:
    """One path's ASGI app: dispatch by method, answer every error in the API's shape."""

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self.handlers = handlers
        self.allowed = ", ".join(handlers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)

        async def send_cased(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [(cased(name), value) for name, value in message["headers"]]
            await send(message)

        try:
            response = await self.handle(request)
            await response(scope, receive, send_cased)
        except asyncio.CancelledError:
            # A kill-like stop cut the connection first: there is nobody to answer, and
            # nothing to report (uvicorn would log each one as an error).
            return

    async def handle(self, request: Request) -> Response:
        ctx = context_of(request.app)
        handler = self.handlers.get(request.method)
        try:
            check_head(request)
            if handler is None:
                raise ApiError(
                    405,
                    "invalid_request",
                    f"{request.method} is not allowed here",
                    headers=(("Allow", self.allowed),),
                )
            return await handler(ctx, request)
        except ApiError as err:
            return error_answer(ctx.store, err)
        except (ClientDisconnect, StoreClosedError):
            # The client went away, or the server is stopping: nobody is left to answer.
            return error_answer(
                ctx.store, ApiError(503, "unavailable", "the provider is stopping", close=True)
            )
        except Exception:
            logger.exception("internal error answering %s %s", request.method, request.url.path)
            return error_answer(
                ctx.store, ApiError(500, "internal_error", "internal error", close=True)
            )


class _RawPath:
    """Route on the path as sent: ``/v1/requests/ID%2Fcancel`` is no cancel of ``ID``.

    Starlette matches the percent-decoded path, so an encoded slash would
    pick another endpoint than the one a proxy or firewall in front saw; here
    the path params keep their encoding, as the stdlib server's did (such an
    id is simply unknown).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw:
            scope = {**scope, "path": raw.decode("latin-1")}
        await self.app(scope, receive, send)


async def _not_found(request: Request, exc: Exception) -> Response:
    ctx = context_of(request.app)
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    try:
        check_head(request)
    except ApiError as too_big:
        return error_answer(ctx.store, too_big)
    target = request.scope.get("raw_path") or b"/"
    if status == 404 and not target.startswith(b"/"):
        # An absolute-form target: the API has only paths, and this is not even a URL.
        err = ApiError(400, "invalid_request", "the request target is not a path on this server")
    elif status == 404:
        err = ApiError(404, "not_found", f"no such endpoint: {request.url.path}")
    else:
        err = ApiError(status, "invalid_request", "the request could not be handled", close=True)
    return error_answer(ctx.store, err)


async def _expire_forever(ctx: Context) -> None:
    store = ctx.store
    while True:
        with ctx.notifier.watch_any() as changed:
            try:
                # A worker thread, never the loop: it expires every overdue request in one
                # call (thousands after a restart: seconds), and it runs once a deadline.
                upcoming = await run_in_threadpool(store.expire_due)
            except StoreClosedError:
                return
            except Exception:
                logger.exception("expiring overdue requests failed")
                upcoming = None
            timeout = 3600.0
            if upcoming is not None:
                timeout = max(0.0, (upcoming - store.now()).total_seconds()) + 0.001
            with anyio.move_on_after(timeout):
                await changed.wait()
        if changed.is_set():
            # A change may bring a nearer deadline; look again, but not at every decision.
            await anyio.sleep(_EXPIRY_REST)


def build_app(
    store: StoreProtocol,
    *,
    poll_cap: float,
    notice: str | None = None,
    client_timeout: float = 20.0,
    rules: Rules = NO_RULES,
    channels: Sequence[Channel] = (),
    backoff: Backoff | None = None,
) -> Starlette:
    """The ASGI app serving ``store``; ``app.state.ctx`` is its :class:`Context` once started.

    Each of ``channels`` adds its inbound routes, and with any, the lifespan
    runs the one outbox worker (:mod:`~approval_guard.provider.channels.outbox`)
    that sends their items (retried with ``backoff``).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        notifier = Notifier(store, loop)
        ctx = Context(
            store=store,
            notifier=notifier,
            calls=StoreCalls(store, loop),
            poll_cap=poll_cap,
            notice=notice,
            client_timeout=client_timeout,
            rules=rules,
        )
        app.state.ctx = ctx
        expirer = asyncio.create_task(_expire_forever(ctx), name="approval-guard-expirer")
        worker: asyncio.Task[None] | None = None
        if channels:
            # Imported here: httpx is needed only when there is something to send.
            from approval_guard.provider.channels.outbox import OutboxWorker

            worker = asyncio.create_task(
                OutboxWorker(store, channels, backoff=backoff).run(),
                name="approval-guard-outbox",
            )
        try:
            yield
        finally:
            for task in (expirer, worker):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            notifier.close()

    app = Starlette(
        routes=[
            Route(path, _Endpoint(handlers))
            for path, handlers in (
                *ROUTES,
                *(one for channel in channels for one in channel.routes()),
            )
        ],
        exception_handlers={HTTPException: _not_found},
        middleware=[Middleware(_RawPath)],
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False
    return app
