"""``POST /v1/requests/wait`` (API 1.2): one request waiting on many ids, answered at first news.

The body is ``{"ids": [str, ...], "wait": duration}``: at most
:data:`MAX_WAIT_IDS` distinct ids. The answer, ``200``, comes as soon as at
least one listed request is not pending, has had its counted approvals
change, or is not found for this credential; else when ``wait`` (capped as a
long poll's) has passed, with nothing in it::

    {"requests": [<request>, ...], "not_found": [id, ...]}

Each request is the object ``GET /v1/requests/{id}`` gives; an id the
credential may not read is reported under ``not_found``, exactly as an unknown
one (nothing of it leaks). At most about :data:`ANSWER_BYTES` of requests are
sent at once, settled ones first; the settled ones left out are still news on
the next wait (a pending one's changed approval count left out is not, until
it changes again). The wait costs one
event on the loop (``waits.ManyWatch``), no thread: reads run in the thread
pool, and a wake re-reads only the ids it names.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from approval_guard._codec.duration import parse_duration_string
from approval_guard._codec.exact_json import dump_json
from approval_guard._codec.wire import PENDING
from approval_guard.provider.http.auth import authenticate
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.render import request_json
from approval_guard.provider.http.responses import (
    bad,
    json_answer,
    json_object,
    no_unknown,
    read_body,
)
from approval_guard.provider.http.store_calls import StoreCall
from approval_guard.provider.http.waits import Notifier, hung_up
from approval_guard.provider.store.models import Credential, StoredRequest
from approval_guard.provider.store.protocol import StoreProtocol
from approval_guard.provider.store.sql.waiting import WaitState

logger = logging.getLogger("approval_guard.provider")

#: The most ids one batched wait may list (docs/provider-api.md).
MAX_WAIT_IDS = 1000
#: The longest id a batched wait may list (our ids are 36 characters).
MAX_ID_CHARS = 200
#: Requests are added to one answer until it holds about this many bytes.
ANSWER_BYTES = 256 * 1024


def _ids(value: object) -> list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_WAIT_IDS:
        raise bad(f"'ids' must be a list of 1 to {MAX_WAIT_IDS} request ids")
    for item in value:
        if not isinstance(item, str) or not 1 <= len(item) <= MAX_ID_CHARS:
            raise bad(f"each of 'ids' must be a string of 1 to {MAX_ID_CHARS} characters")
    if len(set(value)) != len(value):
        raise bad("'ids' must not list an id twice")
    return value


def _wait(value: object, cap: float) -> float:
    if value is None:
        return 0.0
    if not isinstance(value, str):
        raise bad("'wait' must be a duration string such as '30s'")
    try:
        seconds = parse_duration_string(value)
    except ValueError as exc:
        raise bad(f"'wait': {exc}") from None
    return float(min(seconds, cap))


async def wait(ctx: Context, request: Request) -> Response:
    """``POST /v1/requests/wait``."""
    body = await read_body(request)
    credential = await authenticate(ctx.store, request, calls=ctx.calls)
    obj = json_object(body)
    no_unknown(obj, {"ids", "wait"})
    ids = _ids(obj.get("ids"))
    seconds = _wait(obj.get("wait"), ctx.poll_cap)
    # No request id holds U+0000 (and PostgreSQL cannot even compare one): not found, at once.
    odd = [rid for rid in ids if "\x00" in rid]
    ids = [rid for rid in ids if "\x00" not in rid]
    found: list[StoredRequest] = []
    missing: list[str] = []
    if ids:
        found, missing = await wait_many(
            ctx.store,
            ctx.notifier,
            ids,
            credential,
            0.0 if odd else seconds,
            request.receive,
            calls=ctx.calls,
        )
    missing += odd
    # Settled requests first: if the answer is cut short, what is dropped is at worst a
    # pending request's approval count, and its next change is news again.
    found.sort(key=lambda one: one.status == PENDING)
    items: list[Any] = []
    size = 0
    for one in found:
        item = request_json(one)
        size += len(dump_json(item))
        if items and size > ANSWER_BYTES:
            break  # the rest are news again on the next wait
        items.append(item)
    return json_answer(ctx.store, 200, {"requests": items, "not_found": missing})


#: The poll counts being written: kept from the GC until they are done.
_counting: set[asyncio.Future[None]] = set()


def _count(store: StoreProtocol, ids: list[str], calls: StoreCall) -> None:
    """Count a poll of each of ``ids`` in the audit trail, without holding up the wait.

    The write goes behind the writer lock with everyone else's; a wait that has
    news for its caller must not wait for it (a decision is never made to wait
    for a poll's count either).
    """
    if not ids:
        return
    task = asyncio.ensure_future(calls(store.count_polls, ids))
    _counting.add(task)

    def done(t: asyncio.Future[None]) -> None:
        _counting.discard(t)
        if not t.cancelled() and t.exception() is not None:
            logger.warning("counting a batched wait's polls failed: %r", t.exception())

    task.add_done_callback(done)


def _news(before: WaitState | None, now: WaitState) -> bool:
    return now.status != PENDING or (before is not None and before.approvals != now.approvals)


async def wait_many(
    store: StoreProtocol,
    notifier: Notifier,
    ids: Sequence[str],
    viewer: Credential,
    wait: float,
    receive: Receive | None = None,
    *,
    calls: StoreCall = run_in_threadpool,
) -> tuple[list[StoredRequest], list[str]]:
    """The listed requests with news, and the ids not found; after ``wait`` s, maybe neither.

    Registers before it reads, as a single long poll does, so a decision
    committed between the read and the wait still wakes it. ``calls`` runs the
    store's reads and writes (the context's ``StoreCalls``, or a worker thread).
    """
    owner = None if viewer.is_reviewer else viewer.id
    gone = asyncio.Event()
    with notifier.watch_many(list(ids)) as watch:
        watcher = (
            None if receive is None else asyncio.ensure_future(hung_up(receive, gone, watch.event))
        )
        try:
            states = await calls(store.wait_states, ids, owner_id=owner)
            if owner is not None:
                _count(store, [rid for rid in ids if rid in states], calls)
            missing = [rid for rid in ids if rid not in states]
            changed = [rid for rid, state in states.items() if _news(None, state)]
            full: dict[str, StoredRequest] = {}
            end = anyio.current_time() + wait
            while not changed and not missing and not notifier.draining and not gone.is_set():
                remaining = end - anyio.current_time()
                if remaining <= 0:
                    break
                nearest = min(state.deadline_at for state in states.values())
                to_deadline = (nearest - store.now()).total_seconds()
                # A millisecond past the deadline, so the next read sees it expired.
                with anyio.move_on_after(min(remaining, max(0.0, to_deadline) + 0.001)):
                    await watch.event.wait()
                fired, everything = watch.take()
                if gone.is_set():
                    break
                now = store.now()
                look = set(states) if everything else {rid for rid in fired if rid in states}
                look.update(rid for rid, state in states.items() if state.deadline_at <= now)
                if not look:
                    continue
                looked = sorted(look)
                again = await calls(store.get_requests, looked, owner_id=owner)
                for rid in looked:
                    found = again.get(rid)
                    if found is None:
                        missing.append(rid)
                        continue
                    state = WaitState(found.status, found.deadline_at, len(found.approvals))
                    if _news(states[rid], state):
                        changed.append(rid)
                        full[rid] = found
                    else:
                        states[rid] = state
            if any(rid not in full for rid in changed):
                full.update(await calls(store.get_requests, changed, owner_id=owner))
        finally:
            if watcher is not None:
                watcher.cancel()
    missing += [rid for rid in changed if rid not in full]
    return [full[rid] for rid in changed if rid in full], missing
