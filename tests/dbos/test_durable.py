"""approval_guard.dbos in one process: the key a step sends, cancellation, the checkpoint."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.support.frameworks import require_framework

require_framework("dbos")

from dbos import DBOS, SetWorkflowID  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard.dbos import DurableGuard, durable, step_key  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402
from tests.support.durable import sent_keys  # noqa: E402

#: The tools of the running test, by name (a workflow's inputs must be serializable).
TOOLS: dict[str, Callable[..., Any]] = {}


@DBOS.workflow(name="ag_test_one_call")
def one_call(tool: str, amount: int) -> Any:
    return TOOLS[tool]("payment_123", amount)


@DBOS.workflow(name="ag_test_two_calls")
def two_calls(tool: str) -> list[Any]:
    return [TOOLS[tool]("payment_123", 1), TOOLS[tool]("payment_123", 1)]


@DBOS.workflow(name="ag_test_explicit_key")
def explicit_key(tool: str, key: str) -> Any:
    with ag.harness_call(idempotency_key=key):
        return TOOLS[tool]("payment_123", 1)


#: Events a workflow's harness_call(abandon=...) takes, by name (not serializable inputs).
EVENTS: dict[str, threading.Event] = {}


@DBOS.workflow(name="ag_test_abandoned")
def abandoned_call(tool: str, event: str) -> Any:
    with ag.harness_call(abandon=EVENTS[event]):
        return TOOLS[tool]("payment_123", 1)


@DBOS.workflow(name="ag_test_one_call_async")
async def one_call_async(tool: str, amount: int) -> Any:
    return await TOOLS[tool]("payment_123", amount)


@DBOS.workflow(name="ag_test_sync_tools_async")
async def sync_tools_async(tool: str) -> list[Any]:
    return [TOOLS[tool]("payment_123", 1), TOOLS[tool]("payment_123", 2)]


@pytest.fixture
def tools(file_provider: LocalProvider, tmp_path: Path) -> Iterator[dict[str, Callable[..., Any]]]:
    """``refund`` and ``refund_async``: guarded and durable, counting their runs in ``runs``."""
    guard = ag.Guard(
        base_url=file_provider.url,
        credential=file_provider.credential,
        harness_limit="2m",
        poll_wait="5s",
        return_margin="1s",
        deadline_margin="1s",
        ledger=ag.SQLiteLedger(tmp_path / "executions.sqlite"),
    )
    runs: list[int] = []

    @durable
    @guard.requires_approval(timeout="1m")
    def refund(payment_id: str, amount: int) -> str:
        runs.append(amount)
        return f"refunded {amount}"

    @durable
    @guard.requires_approval(timeout="1m")
    async def refund_async(payment_id: str, amount: int) -> str:
        runs.append(amount)
        return f"refunded {amount}"

    durable_guard = DurableGuard(
        base_url=file_provider.url,
        credential=file_provider.credential,
        harness_limit="2m",
        poll_wait="5s",
        return_margin="1s",
        deadline_margin="1s",
        ledger=ag.SQLiteLedger(tmp_path / "executions.sqlite"),
    )

    @durable_guard.requires_approval(timeout="1m")
    def refund_by_guard(payment_id: str, amount: int) -> str:
        runs.append(amount)
        return f"refunded {amount}"

    @durable_guard.requires_approval(timeout="1m")
    async def refund_by_guard_async(payment_id: str, amount: int) -> str:
        runs.append(amount)
        return f"refunded {amount}"

    TOOLS.update(
        refund=refund,
        refund_async=refund_async,
        refund_by_guard=refund_by_guard,
        refund_by_guard_async=refund_by_guard_async,
        runs=runs.copy,
    )
    yield TOOLS
    TOOLS.clear()
    guard.close()
    durable_guard.close()


def test_step_key_is_the_workflow_id_and_the_step_position() -> None:
    """The key is dbos:<workflow id>:<step id>."""
    assert step_key("refund-42", 3) == "dbos:refund-42:3"


def test_step_key_too_long_or_unsendable_is_a_digest_never_cut() -> None:
    """A key over 255 characters, or with a space, uses the workflow id's SHA-256 whole."""
    long_id = "w" * 300
    long_key = step_key(long_id, 7)
    assert long_key.startswith("dbos~") and long_key.endswith(":7")
    assert len(long_key) == len("dbos~") + 64 + len(":7")
    assert step_key("w" * 301, 7) != long_key
    assert step_key("with space", 1).startswith("dbos~")
    assert step_key("x" * 245, 1) == "dbos:" + "x" * 245 + ":1"  # 251 characters: as is


def test_a_guarded_call_in_a_workflow_sends_the_workflows_key(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """No harness code: the request's key is the workflow id and the guarded step's position."""
    file_provider.policy = approve_after(0)
    with SetWorkflowID("wf-key"):
        out = one_call("refund", 7)
    assert out == "refunded 7"
    steps = DBOS.list_workflow_steps("wf-key")
    guarded = [s for s in steps if s["function_name"] == "approval_guard:refund"]
    assert len(guarded) == 1 and guarded[0]["output"] == "refunded 7"
    assert sent_keys(file_provider.db) == [step_key("wf-key", guarded[0]["function_id"])]


def test_a_durable_guards_tool_in_a_workflow_is_a_step_with_the_workflows_key(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """DurableGuard: a plain @requires_approval tool is the durable step, no decorator needed."""
    file_provider.policy = approve_after(0)
    with SetWorkflowID("wf-guard"):
        assert one_call("refund_by_guard", 4) == "refunded 4"
    (step,) = [
        s
        for s in DBOS.list_workflow_steps("wf-guard")
        if s["function_name"] == "approval_guard:refund_by_guard"
    ]
    assert step["output"] == "refunded 4"
    assert sent_keys(file_provider.db) == [step_key("wf-guard", step["function_id"])]
    assert tools["refund_by_guard"]("payment_123", 4) == "refunded 4"  # outside: as a Guard
    assert len(set(sent_keys(file_provider.db))) == 2


def test_a_durable_guards_async_tool_in_an_async_workflow_sends_the_workflows_key(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """DurableGuard with an async tool in an async workflow: the same key scheme."""
    file_provider.policy = approve_after(0)

    async def run() -> Any:
        with SetWorkflowID("wf-guard-async"):
            handle = await DBOS.start_workflow_async(one_call_async, "refund_by_guard_async", 6)
        return await handle.get_result()

    assert asyncio.run(run()) == "refunded 6"
    (key,) = sent_keys(file_provider.db)
    assert key.startswith("dbos:wf-guard-async:")


def test_a_workflow_id_too_long_for_a_key_sends_its_digest(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """A 300-character workflow id: the key sent is dbos~<sha256>:<step>, within 255."""
    file_provider.policy = approve_after(0)
    long_id = "refund-" + "x" * 293
    with SetWorkflowID(long_id):
        assert one_call("refund", 1) == "refunded 1"
    (key,) = sent_keys(file_provider.db)
    assert key.startswith("dbos~") and len(key) <= 255
    assert key in {step_key(long_id, step) for step in range(10)}


@pytest.mark.parametrize("ledger", [None, "memory"])
def test_a_durable_guard_without_a_shared_record_is_refused(
    file_provider: LocalProvider, ledger: str | None
) -> None:
    """No ledger, or one in memory: a recovered step could run the tool twice, so it raises."""
    with pytest.raises(ag.ConfigurationError, match="outlives its process"):
        DurableGuard(
            base_url=file_provider.url,
            credential=file_provider.credential,
            ledger=None if ledger is None else ag.MemoryLedger(),
        )


def test_durable_refuses_a_guard_with_a_process_record_in_a_workflow(
    dbos_app: str, file_provider: LocalProvider
) -> None:
    """durable() over a Guard with this process's record: refused in a workflow, nothing sent."""
    guard = ag.Guard(base_url=file_provider.url, credential=file_provider.credential)
    file_provider.policy = approve_after(0)

    def refund(payment_id: str, amount: int) -> int:
        return amount

    TOOLS["refund"] = durable(guard.requires_approval(timeout="1m")(refund))
    try:
        with (
            pytest.raises(ag.ConfigurationError, match="outlives its process"),
            SetWorkflowID("wf-memory"),
        ):
            one_call("refund", 1)
        assert TOOLS["refund"]("payment_123", 1) == 1  # outside a workflow: as today
        assert file_provider.stats.creates == 1
    finally:
        TOOLS.clear()
        guard.close()


def test_an_explicit_harness_key_wins_in_a_workflow(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """harness_call(idempotency_key=...) around the call is the key sent."""
    file_provider.policy = approve_after(0)
    with SetWorkflowID("wf-explicit"):
        assert explicit_key("refund", "toolcall_abc") == "refunded 1"
    assert sent_keys(file_provider.db) == ["toolcall_abc"]


def test_two_calls_with_the_same_arguments_in_one_workflow_are_two_requests(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """Each call is its own step, so its own key and its own request."""
    file_provider.policy = approve_after(0)
    with SetWorkflowID("wf-twice"):
        assert two_calls("refund") == ["refunded 1", "refunded 1"]
    keys = sent_keys(file_provider.db)
    assert len(keys) == 2 and len(set(keys)) == 2
    assert len(file_provider.requests()) == 2 and tools["runs"]() == [1, 1]


def test_a_finished_step_is_not_asked_again_when_the_workflow_runs_again(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """A denial is checkpointed: running the workflow's id again returns it, with no request."""
    file_provider.policy = deny_after(0, "no")
    with SetWorkflowID("wf-denied"):
        first = one_call("refund", 5)
    assert isinstance(first, ag.NotRun) and first.reason is ag.Reason.DENIED
    with SetWorkflowID("wf-denied"):
        again = one_call("refund", 5)
    assert again == first
    assert len(file_provider.requests()) == 1 and tools["runs"]() == []
    assert file_provider.stats.creates == 1


def test_outside_a_workflow_the_durable_tool_is_the_guarded_tool(
    tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """No DBOS at all: each call is its own request with a random key, as without durable()."""
    file_provider.policy = approve_after(0)
    assert tools["refund"]("payment_123", 2) == "refunded 2"
    assert tools["refund"]("payment_123", 2) == "refunded 2"
    keys = sent_keys(file_provider.db)
    assert len(set(keys)) == 2 and not any(key.startswith("dbos") for key in keys)


def test_async_workflow_sends_the_workflows_key(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """An async workflow and async guarded tool: the same key scheme, the same checkpoint."""
    file_provider.policy = approve_after(0)

    async def run() -> Any:
        with SetWorkflowID("wf-async"):
            handle = await DBOS.start_workflow_async(one_call_async, "refund_async", 3)
        return await handle.get_result()

    assert asyncio.run(run()) == "refunded 3"
    (key,) = sent_keys(file_provider.db)
    assert key.startswith("dbos:wf-async:")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_cancelling_the_workflow_withdraws_the_pending_request(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider, asynchronous: bool
) -> None:
    """DBOS.cancel_workflow while the step waits: the request is cancelled at the provider."""
    if asynchronous:
        done = threading.Event()

        def run_async() -> None:
            async def start() -> None:
                with SetWorkflowID("wf-cancel"):
                    await DBOS.start_workflow_async(one_call_async, "refund_async", 9)
                await asyncio.get_running_loop().run_in_executor(None, done.wait)

            asyncio.run(start())

        runner = threading.Thread(target=run_async)
        runner.start()
    else:
        with SetWorkflowID("wf-cancel"):
            DBOS.start_workflow(one_call, "refund", 9)
    try:
        request = file_provider.next_request(timeout=30)
        DBOS.cancel_workflow("wf-cancel")
        assert _wait_until(lambda: file_provider.get(request.id).status == "cancelled", 15)
    finally:
        if asynchronous:
            done.set()
            runner.join(30)
    assert tools["runs"]() == []


def test_the_harness_abandon_event_still_withdraws_inside_a_workflow(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """harness_call(abandon=event) around the durable call: setting it withdraws the request."""
    EVENTS["stop"] = threading.Event()
    try:
        with SetWorkflowID("wf-abandon"):
            handle = DBOS.start_workflow(abandoned_call, "refund", "stop")
        request = file_provider.next_request(timeout=30)
        EVENTS["stop"].set()
        out = handle.get_result()
    finally:
        EVENTS.clear()
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.CANCELLED
    assert file_provider.get(request.id).status == "cancelled"
    assert tools["runs"]() == []


def _wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Wait for ``condition`` on an event's timed wait (nothing sets it)."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if condition():
            return True
        pause.wait(0.05)
    return condition()


def test_a_fork_from_the_guarded_step_is_a_new_call_with_its_own_limit(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """DBOS.fork_workflow from the guarded step: a new call, asked now, not the original's limit."""
    long_ago = datetime.now(timezone.utc) - timedelta(days=1)
    with SetWorkflowID("wf-fork"), ag.harness_call(started_at=long_ago, idempotency_key="tc_1"):
        first = one_call("refund", 4)
    assert isinstance(first, ag.NotRun) and first.reason is ag.Reason.NOT_OBTAINED
    assert file_provider.stats.creates == 0  # its limit had passed: not even asked
    (step,) = [
        s
        for s in DBOS.list_workflow_steps("wf-fork")
        if s["function_name"] == "approval_guard:refund"
    ]
    file_provider.policy = approve_after(0)
    with SetWorkflowID("wf-fork-2"):
        forked = DBOS.fork_workflow("wf-fork", step["function_id"])
    assert forked.get_result() == "refunded 4"
    assert tools["runs"]() == [4]
    (key,) = sent_keys(file_provider.db)
    assert key.startswith("dbos:wf-fork-2:")


@pytest.mark.parametrize("tool", ["refund", "refund_by_guard"])
def test_a_sync_guarded_tool_in_async_workflow_code_is_a_durable_step(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider, tool: str
) -> None:
    """Called directly in an async workflow, a sync tool runs as its step, each with its own key."""
    file_provider.policy = approve_after(0)

    async def run() -> Any:
        with SetWorkflowID("wf-sync-in-async"):
            handle = await DBOS.start_workflow_async(sync_tools_async, tool)
        return await handle.get_result()

    assert asyncio.run(run()) == ["refunded 1", "refunded 2"]
    keys = sent_keys(file_provider.db)
    assert len(set(keys)) == 2 and all(k.startswith("dbos:wf-sync-in-async:") for k in keys)
    assert tools["runs"]() == [1, 2]


def test_the_harness_abandon_event_withdraws_while_dbos_cannot_be_read(
    dbos_app: str, tools: dict[str, Any], file_provider: LocalProvider
) -> None:
    """The harness's event withdraws the request while the watcher waits on DBOS's database."""
    EVENTS["stop"] = threading.Event()
    try:
        with SetWorkflowID("wf-busy"):
            handle = DBOS.start_workflow(abandoned_call, "refund", "stop")
        request = file_provider.next_request(timeout=30)
        lock = sqlite3.connect(dbos_app.removeprefix("sqlite:///"), isolation_level=None)
        try:
            lock.execute("BEGIN EXCLUSIVE")  # no reader gets in: DBOS's reads wait
            assert _wait_until(_watcher_reading, 15)
            EVENTS["stop"].set()
            assert _wait_until(lambda: file_provider.get(request.id).status == "cancelled", 10)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        out = handle.get_result()
    finally:
        EVENTS.clear()
    assert isinstance(out, ag.NotRun) and out.reason is ag.Reason.CANCELLED
    assert tools["runs"]() == []


def _watcher_reading() -> bool:
    """The cancellation watcher's thread is inside DBOS.list_workflows."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        if names.get(ident) != "approval_guard-dbos-cancel":
            continue
        walk: Any = frame
        while walk is not None:
            if walk.f_code.co_name == "list_workflows":
                return True
            walk = walk.f_back
    return False
