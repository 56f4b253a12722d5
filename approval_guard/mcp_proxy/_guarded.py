"""One relayed ``tools/call`` through the guard: its spec, the wait, and what the client gets back.

The call's ``arguments`` are the approval request's arguments and the child's
tool name is the request's tool (a spec from the tool's ``inputSchema``, see
``approval_guard/_options/schema.py``). The guard's own rules do the rest:
expiry checked right before the call, the execution record, edits converted
by the schema's types. Approved: the child's ``call_tool`` runs once, with the
approved (possibly edited) arguments, and its result is relayed as it is (a
child that dies or breaks off before answering gives an ``isError`` result
saying the call was passed on and may have run). Not run: an ``isError``
result whose text is the NotRun's sentence.

The guarded call runs in a task of its own: MCP cancels a handler (on
``notifications/cancelled``) with an anyio cancel scope, which would cancel
every later await too, including the withdrawal of the request. The task is
cancelled once instead, and the handler waits (shielded, bounded) while the
guard withdraws the request, then lets the cancellation go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from approval_guard._call.outcome import NotRun
from approval_guard._options.converters import clip
from approval_guard._options.shape import from_schema
from approval_guard._options.spec import build_spec
from approval_guard.exceptions import ArgumentSerializationError, ConfigurationError
from approval_guard.mcp_proxy._progress import Report, Waiting, report_while_waiting
from approval_guard.mcp_proxy._rules import ProxyRules

if TYPE_CHECKING:
    from mcp.types import CallToolResult

    from approval_guard._guard import Guard

log = logging.getLogger("approval_guard")

#: How long a cancelled call may take to withdraw its request before the handler lets go.
WITHDRAW_GRACE = 10.0

#: Calls a tool of the child: ``(name, arguments) -> CallToolResult``.
Forward = Callable[[str, dict[str, Any]], Awaitable["CallToolResult"]]


def error_result(text: str) -> CallToolResult:
    """A tool result that says the call did not happen (``isError`` true), with ``text``."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


class GuardedTools:
    """The guarded side of the proxy: which calls need approval, and making them."""

    def __init__(self, guard: Guard, rules: ProxyRules, forward: Forward) -> None:
        self._guard = guard
        self._rules = rules
        self._forward = forward
        #: Each tool's inputSchema, as the child last listed it.
        self._schemas: dict[str, Mapping[str, Any]] = {}

    @property
    def rules(self) -> ProxyRules:
        return self._rules

    def learn(self, schemas: Mapping[str, Mapping[str, Any]]) -> None:
        """Remember the child's tools' input schemas (from a ``tools/list``)."""
        self._schemas.update(schemas)

    def knows(self, tool: str) -> bool:
        return tool in self._schemas

    async def call(
        self, tool: str, arguments: dict[str, Any], report: Report | None = None
    ) -> CallToolResult:
        """``tools/call`` of a guarded tool: the child's result once approved, else isError."""
        waiting = Waiting(tool)

        async def run(**approved: Any) -> CallToolResult:
            try:
                return await self._forward(tool, approved)
            except Exception as exc:  # the child died or broke off: the call was passed on
                log.error("mcp-proxy: %s failed after it was approved and passed on: %r", tool, exc)
                return error_result(
                    f"{tool} was approved and passed on to the MCP server, which failed before "
                    f"it answered ({clip(str(exc) or type(exc).__name__, 120)}), so it may "
                    "have run; the approval is used and will not run it again."
                )

        # The tool's schema may be unknown (not listed): nothing is editable then. Only
        # arguments the call has can be edited: the request offers what it sends.
        known = self.knows(tool)
        editable = [name for name in self._rules.editable.get(tool, ()) if name in arguments]
        try:
            spec = build_spec(
                from_schema(run, tool, self._schemas.get(tool, {})),
                options={
                    "timeout": self._rules.timeout,
                    "editable": editable if known else (),
                    "redact": self._rules.redact.get(tool),  # never dropped: unknown, not run
                    "on_event": waiting,
                },
                name=tool,
            )
        except ConfigurationError as exc:
            # The child changed the tool since the proxy checked it: never run it unasked.
            log.error("mcp-proxy cannot guard %s as configured: %s", tool, exc)
            return error_result(
                f"The proxy could not ask for approval of {tool} as it is configured ({exc}), "
                f"so {tool} did not run."
            )
        call = asyncio.ensure_future(self._guard._call_async(spec, (), dict(arguments)))
        call.add_done_callback(_retrieve)
        progress = None
        if report is not None:
            progress = asyncio.ensure_future(report_while_waiting(waiting, report))
        try:
            outcome = await _cancellable(call)
        except ArgumentSerializationError as exc:
            return error_result(
                f"The call's arguments cannot be sent for approval ({exc}), so {tool} did not run."
            )
        finally:
            if progress is not None:
                progress.cancel()
        if isinstance(outcome, NotRun):
            return error_result(str(outcome))
        result: CallToolResult = outcome
        return result


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Read a finished call's exception, so that nobody is warned it went unread."""
    if not task.cancelled():
        task.exception()


async def _cancellable(call: asyncio.Future[Any]) -> Any:
    """Await ``call``; if this handler is cancelled, cancel it once and let it withdraw."""
    import anyio

    try:
        return await asyncio.shield(call)
    except BaseException:
        if not call.done():
            call.cancel()
            # Shielded from the handler's cancel scope, bounded: the withdrawal is the
            # guard's (DELETE at the provider), and it must not be cut short.
            with anyio.CancelScope(shield=True), anyio.move_on_after(WITHDRAW_GRACE):
                await asyncio.wait({call})
        raise
