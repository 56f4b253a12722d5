"""While a guarded call waits: progress notifications, and the client's cancel withdrawing it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.support.frameworks import require_framework

require_framework("mcp")

import anyio  # noqa: E402
import anyio.to_thread  # noqa: E402

from approval_guard.testing import LocalProvider, approve_after  # noqa: E402
from tests.support.mcp_proxy import RECORDER, proxied, recorded  # noqa: E402

NOTE = {"name": "groceries", "text": "milk"}


def test_a_cancelled_call_withdraws_its_request_and_never_calls_the_child(
    provider: LocalProvider, record: Path
) -> None:
    """The client's notifications/cancelled withdraws the request; the child is never called."""
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with proxied(provider, ["--guard", "write_*"], [*RECORDER, str(record)]) as client:
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    seen["result"] = await client.call_tool("write_note", NOTE)

                group.start_soon(call)
                request = await anyio.to_thread.run_sync(provider.next_request)
                seen["id"] = request.id
                group.cancel_scope.cancel()  # the client abandons the call: MCP's cancel
            deadline = time.monotonic() + 15
            while provider.get(seen["id"]).status == "pending" and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            seen["after"] = await client.call_tool("read_notes", {})

    anyio.run(scenario)
    assert "result" not in seen
    assert "cancelled" == provider.get(seen["id"]).status
    assert not seen["after"].is_error  # the proxy still serves
    assert ["read_notes"] == [call["tool"] for call in recorded(record)]


def test_progress_notifications_arrive_while_waiting(provider: LocalProvider, record: Path) -> None:
    """A client that gives a progressToken hears "waiting for approval (... left)" meanwhile."""
    provider.policy = approve_after(7)  # the first report at once, the next 5 s later
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async def call() -> Any:
        async with proxied(
            provider, ["--guard", "write_*", "--timeout", "10m"], [*RECORDER, str(record)]
        ) as client:
            return await client.call_tool("write_note", NOTE, progress_callback=on_progress)

    result = anyio.run(call)
    assert not result.is_error
    assert len(heard) >= 2, heard
    progress = [p for p, _, _ in heard]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    for _, _, message in heard:
        assert message is not None
        assert message.startswith("waiting for approval of write_note (")
        assert message.endswith(" left)")
    assert "(10m left)" in str(heard[0][2]) or "(9m5" in str(heard[0][2])
    assert 1 == len(recorded(record))
