"""A guarded tool as a DBOS step: the key from the workflow, the outcome checkpointed once.

Inside a DBOS workflow, :func:`durable` runs the guarded call as two steps. The
first checkpoints when the call first started (wall clock) and the facts of an
enclosing ``harness_call`` (its key, limit, requested_by, batch, reason), so a
workflow recovered after a crash (where DBOS runs it without the harness's
context) keeps counting the harness's limit from the first attempt and sends
the first attempt's create. The second is the guarded call itself: its idempotency key is the
workflow's id and the step's position (:func:`step_key`), so the recovered step
sends the same create and adopts the same request; the ledger decides whether
the tool already started; and DBOS checkpoints the result (the tool's value, its
exception, or the ``NotRun``) so a finished step is never asked again. Outside a
workflow, or inside another step, the tool is called as it is.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, ParamSpec, TypeVar, cast, overload

import attrs
from dbos import DBOS

from approval_guard import _harness
from approval_guard._guard import Guard
from approval_guard._ledger.memory import MemoryLedger
from approval_guard._ledger.scoped import ProviderLedger
from approval_guard.dbos._cancel import watching
from approval_guard.exceptions import ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")

#: The contract's longest idempotency key.
_MAX_KEY = 255
#: The first step's name: it checkpoints when the guarded call first started.
STARTED_STEP = "approval_guard.started_at"


def step_key(workflow_id: str, step_id: int) -> str:
    """The idempotency key of the guarded call at step ``step_id`` of ``workflow_id``.

    ``dbos:<workflow id>:<step id>``; when that is longer than the contract's 255
    characters or holds a character a key may not (a space, non-ASCII), the
    workflow id is replaced by its SHA-256: ``dbos~<hex>:<step id>``, never cut.

    Args:
        workflow_id: The DBOS workflow's id.
        step_id: The step's position in the workflow (DBOS's function id).
    """
    key = f"dbos:{workflow_id}:{step_id}"
    if len(key) <= _MAX_KEY and all(32 < ord(ch) < 127 for ch in key):
        return key
    digest = hashlib.sha256(workflow_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"dbos~{digest}:{step_id}"


@overload
def durable(
    fn: Callable[P, Awaitable[R]], /, *, name: str | None = None
) -> Callable[P, Awaitable[R]]: ...


@overload
def durable(fn: Callable[P, R], /, *, name: str | None = None) -> Callable[P, R]: ...


def durable(fn: Callable[..., Any], /, *, name: str | None = None) -> Callable[..., Any]:
    """Make a guarded tool a durable DBOS step when it is called inside a DBOS workflow.

    ::

        @durable
        @guard.requires_approval(timeout="30m")
        def issue_refund(payment_id: str, amount: int) -> str: ...

        @DBOS.workflow()
        def refund_flow(payment_id: str) -> str:
            out = issue_refund(payment_id, 4900)  # waits, survives a crash, runs once
            return "refunded" if not isinstance(out, ag.NotRun) else out.message

    Inside a workflow the call takes its idempotency key from the workflow's id and
    the step's position (:func:`step_key`; an enclosing ``harness_call(idempotency_key=...)``
    wins), counts the harness's limit from its first attempt, withdraws its
    request when the workflow is cancelled, and its outcome is checkpointed by
    DBOS. Outside a workflow it is the guarded tool, unchanged.

    Args:
        fn: The guarded tool (``@guard.requires_approval``), sync or async. It should
            make one guarded call: every guarded call it makes shares the step's key.
        name: The step's name in DBOS (default ``approval_guard:<tool name>``).
    """
    if not callable(fn):
        raise ConfigurationError(f"durable() takes a guarded tool, not {type(fn).__name__}")
    if name is None:
        spec = getattr(fn, "__approval_guard__", None)
        name = f"approval_guard:{spec.name if spec is not None else fn.__qualname__}"
    elif not isinstance(name, str) or not name:
        raise ConfigurationError("name must be a non-empty string")
    step_name = name
    guard_of: Callable[[], Guard] | None = getattr(fn, "__approval_guard_of__", None)
    if inspect.iscoroutinefunction(fn):
        afn = cast("Callable[..., Awaitable[Any]]", fn)

        @functools.wraps(fn)
        async def async_durable(*args: Any, **kwargs: Any) -> Any:
            if guard_of is not None and _in_workflow():
                check_record(guard_of())
            return await as_step_async(step_name, afn, args, kwargs)

        return async_durable

    @functools.wraps(fn)
    def sync_durable(*args: Any, **kwargs: Any) -> Any:
        if guard_of is not None and _in_workflow():
            check_record(guard_of())
        return as_step(step_name, fn, args, kwargs)

    return sync_durable


def as_step(name: str, fn: Callable[..., R], args: Any, kwargs: Any) -> R:
    """``fn(*args, **kwargs)``: in workflow code, as the durable step ``name``; else as it is."""
    if not _in_workflow():
        return fn(*args, **kwargs)
    if _loop_running():
        # Async workflow code calling a sync tool: DBOS.run_step refuses a running
        # loop, so the steps run on a thread of their own, in this context (the
        # workflow's), while the loop waits, as it waits for any sync call.
        context = contextvars.copy_context()
        with ThreadPoolExecutor(1, thread_name_prefix="approval_guard-dbos-step") as pool:
            return pool.submit(context.run, _as_steps, name, fn, args, kwargs).result()
    return _as_steps(name, fn, args, kwargs)


def _as_steps(name: str, fn: Callable[..., R], args: Any, kwargs: Any) -> R:
    started = DBOS.run_step({"name": STARTED_STEP}, _first_attempt)
    return DBOS.run_step({"name": name}, _in_step, started, fn, args, kwargs)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def as_step_async(name: str, fn: Callable[..., Awaitable[R]], args: Any, kwargs: Any) -> R:
    """``await fn(*args, **kwargs)``, as the durable step ``name`` in async workflow code."""
    if not _in_workflow():
        return await fn(*args, **kwargs)
    started = await DBOS.run_step_async({"name": STARTED_STEP}, _first_attempt)
    return await DBOS.run_step_async({"name": name}, _in_step_async, started, fn, args, kwargs)


def _in_step(started: Any, fn: Callable[..., R], args: Any, kwargs: Any) -> R:
    with _step_facts(started):
        return fn(*args, **kwargs)


async def _in_step_async(
    started: Any, fn: Callable[..., Awaitable[R]], args: Any, kwargs: Any
) -> R:
    with _step_facts(started):
        return await fn(*args, **kwargs)


def check_record(guard: Guard) -> None:
    """Refuse a Guard whose execution record dies with its process: a recovery could not see it.

    With it, a crash between the claim and the tool's end would let the recovered
    step claim again, in a new process's empty record, and run the tool twice.
    """
    ledger = guard.ledger
    record = ledger.record if isinstance(ledger, ProviderLedger) else ledger
    if isinstance(record, MemoryLedger):
        raise ConfigurationError(
            "a durable guarded call needs an execution record that outlives its process, "
            "shared by every process that may recover the workflow: "
            "Guard(ledger=ag.SQLiteLedger(path)) on one machine, "
            "Guard(ledger=ag.PostgresLedger(dsn)) on several"
        )


def _in_workflow() -> bool:
    """In a workflow's own code: not outside one, not inside a step (which just runs code)."""
    return DBOS.workflow_id is not None and DBOS.step_id is None


#: The harness facts the first step checkpoints (``abandon``, an event, is the attempt's own).
_CHECKPOINTED = ("idempotency_key", "limit", "requested_by", "batch", "reason")


def _first_attempt() -> dict[str, Any]:
    """The first step's checkpoint: when the call started (wall clock) and the harness's facts.

    A recovered workflow runs without the context of a ``harness_call`` made around
    it, so the first attempt's facts, not the recovery's, are the call's: the same
    key (the same request, the same execution record row) and the same start.
    """
    facts = _harness.current()
    started = time.time()
    if facts.started_at is not None:
        started = min(started, facts.started_at.timestamp())
    return {
        "workflow": DBOS.workflow_id,
        "started": started,
        **{name: getattr(facts, name) for name in _CHECKPOINTED},
    }


@contextmanager
def _step_facts(first: Any) -> Iterator[None]:
    """The harness facts of the guarded call running as the current step."""
    workflow_id = DBOS.workflow_id
    step_id = DBOS.step_id
    assert workflow_id is not None and step_id is not None
    facts = _harness.current()
    checkpoint: dict[str, Any] = first if isinstance(first, dict) else {"started": first}
    if checkpoint.get("workflow", workflow_id) != workflow_id:
        # DBOS.fork_workflow copied another workflow's first step: this is a new call.
        checkpoint = _first_attempt()
    started = datetime.fromtimestamp(checkpoint["started"], tz=timezone.utc)
    if facts.started_at is not None:
        started = min(started, facts.started_at)
    kept = {name: checkpoint[name] for name in _CHECKPOINTED if name in checkpoint}
    with watching(workflow_id, facts.abandon) as abandon:
        key = kept.pop("idempotency_key", facts.idempotency_key) or step_key(workflow_id, step_id)
        step = attrs.evolve(facts, **kept, idempotency_key=key, abandon=abandon, started_at=started)
        with _harness.using(step):
            yield
