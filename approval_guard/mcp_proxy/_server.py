"""The proxy's MCP server: the child's tools, resources and prompts, relayed unchanged.

A low-level ``mcp.server.lowlevel.Server`` whose handlers pass each request
on to a ``ClientSession`` connected to the child server, and its answer back:
``tools/list`` as the child lists it (names, descriptions, input and output
schemas, annotations), ``tools/call`` of an unguarded tool straight through
(its progress relayed), of a guarded tool through :class:`GuardedTools`. Only
what the child's capabilities offer is offered; requests are relayed, the
child's own notifications (list changes, logs) are not.

A call is passed on only under a name the child lists exactly (its list read
again once, if the name is new): a server that looks names up loosely would
otherwise run ``DELETE_FILE``, ``delete_file `` or a homoglyph of a guarded
tool without the rules (redaction, editable arguments) of the tool it runs,
or unguarded altogether.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from approval_guard._options.converters import clip
from approval_guard.exceptions import ConfigurationError
from approval_guard.mcp_proxy._guarded import GuardedTools, error_result

log = logging.getLogger("approval_guard")

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult


#: The most ``tools/list`` pages read at once (a server that pages forever is refused).
MAX_PAGES = 100
#: How long the child may take to answer the ping before a guarded call (seconds).
PING_TIMEOUT = 10.0
#: JSON-RPC's "internal error" code, for a child's answer the proxy cannot read.
INTERNAL_ERROR = -32603


def tool_schemas(listing: ListToolsResult) -> dict[str, dict[str, Any]]:
    """Each listed tool's ``inputSchema`` by name."""
    return {tool.name: dict(tool.input_schema) for tool in listing.tools}


async def all_tools(child: ClientSession) -> dict[str, dict[str, Any]]:
    """Every tool the child lists (all pages): its ``inputSchema`` by name."""
    from mcp import types

    schemas: dict[str, dict[str, Any]] = {}
    cursor = None
    for _ in range(MAX_PAGES):
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        listing = await child.list_tools(params=params)
        schemas.update(tool_schemas(listing))
        cursor = listing.next_cursor
        if cursor is None:
            return schemas
    raise ConfigurationError(f"the MCP server lists its tools in more than {MAX_PAGES} pages")


async def listed(child: ClientSession, guarded: GuardedTools, name: str) -> bool:
    """Whether the child lists a tool named exactly ``name`` (asked again if it is new)."""
    if not guarded.knows(name):
        try:
            guarded.learn(await all_tools(child))
        except Exception:
            return False  # the child cannot say: the call is not passed on
    return guarded.knows(name)


async def answering(child: ClientSession) -> bool:
    """Whether the child still answers (a ping, bounded): a dead one says so at once."""
    import anyio

    try:
        with anyio.fail_after(PING_TIMEOUT):
            await child.send_ping()
    except Exception:
        return False
    return True


def build_server(child: ClientSession, guarded: GuardedTools) -> Server[Any]:
    """The relaying server for ``child`` (initialized), guarding as ``guarded`` says."""
    from mcp import types
    from mcp.server.lowlevel import Server

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        from mcp.shared.exceptions import MCPError

        try:
            listing = await child.send_request(
                types.ListToolsRequest(params=params), types.ListToolsResult
            )
        except MCPError:
            raise  # the child's own error, relayed as it is
        except Exception as exc:  # an answer that is not MCP's shape
            log.error("mcp-proxy: %s", unreadable_list(exc))
            raise MCPError(INTERNAL_ERROR, unreadable_list(exc)) from None
        guarded.learn(tool_schemas(listing))
        return listing

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        name = params.name
        arguments = dict(params.arguments or {})

        async def report(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        if not await listed(child, guarded, name):
            return error_result(
                f"The server does not list a tool named {clip(repr(name), 80)}, so the proxy did "
                "not pass the call on and no tool ran."
            )
        if guarded.rules.guards(name):
            if not await answering(child):
                # Nobody is asked to approve a call that cannot run.
                log.error("mcp-proxy: %s not asked for: the MCP server is not running", name)
                return error_result(
                    f"The MCP server is not running (it does not answer), so the proxy asked "
                    f"nobody to approve {clip(name, 80)} and it did not run."
                )
            return await guarded.call(name, arguments, report)
        return await child.send_request(
            types.CallToolRequest(
                params=types.CallToolRequestParams(name=name, arguments=params.arguments)
            ),
            types.CallToolResult,
            progress_callback=report,
        )

    def relay(request_type: Any, result_type: Any) -> Any:
        async def handler(ctx: ServerRequestContext[Any], params: Any) -> Any:
            return await child.send_request(request_type(params=params), result_type)

        return handler

    offered = child.server_capabilities
    handlers: dict[str, Any] = {}
    if offered is not None and offered.resources is not None:
        handlers["on_list_resources"] = relay(types.ListResourcesRequest, types.ListResourcesResult)
        handlers["on_list_resource_templates"] = relay(
            types.ListResourceTemplatesRequest, types.ListResourceTemplatesResult
        )
        handlers["on_read_resource"] = relay(types.ReadResourceRequest, types.ReadResourceResult)
    if offered is not None and offered.prompts is not None:
        handlers["on_list_prompts"] = relay(types.ListPromptsRequest, types.ListPromptsResult)
        handlers["on_get_prompt"] = relay(types.GetPromptRequest, types.GetPromptResult)
    if offered is not None and offered.completions is not None:
        handlers["on_completion"] = relay(types.CompleteRequest, types.CompleteResult)
    info = child.server_info
    return Server(
        info.name if info is not None else "approval-guard-mcp-proxy",
        version=info.version if info is not None else "",
        instructions=child.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **handlers,
    )


def unreadable_list(exc: BaseException) -> str:
    """One line on a ``tools/list`` answer the proxy cannot read (no traceback, bounded)."""
    first = (str(exc) or type(exc).__name__).splitlines()[0]
    return f"the MCP server's tools/list answer could not be read ({clip(first, 160)})"


async def forward_call(child: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    """An approved call, passed on to the child once; its result as the child gave it."""
    from mcp import types

    return await child.send_request(
        types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments)),
        types.CallToolResult,
    )
