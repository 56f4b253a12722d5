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

from typing import TYPE_CHECKING, Any

from approval_guard._options.converters import clip
from approval_guard.exceptions import ConfigurationError
from approval_guard.mcp_proxy._guarded import GuardedTools, error_result

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult


#: The most ``tools/list`` pages read at once (a server that pages forever is refused).
MAX_PAGES = 100


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


def build_server(child: ClientSession, guarded: GuardedTools) -> Server[Any]:
    """The relaying server for ``child`` (initialized), guarding as ``guarded`` says."""
    from mcp import types
    from mcp.server.lowlevel import Server

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listing = await child.send_request(
            types.ListToolsRequest(params=params), types.ListToolsResult
        )
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


async def forward_call(child: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    """An approved call, passed on to the child once; its result as the child gave it."""
    from mcp import types

    return await child.send_request(
        types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments)),
        types.CallToolResult,
    )
