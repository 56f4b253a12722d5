"""The proxy's MCP server: the child's tools, resources and prompts, relayed unchanged.

A low-level ``mcp.server.lowlevel.Server`` whose handlers pass each request
on to a ``ClientSession`` connected to the child server, and its answer back:
``tools/list`` as the child lists it (names, descriptions, input and output
schemas, annotations), ``tools/call`` of an unguarded tool straight through
(its progress relayed), of a guarded tool through :class:`GuardedTools`. Only
what the child's capabilities offer is offered; requests are relayed, the
child's own notifications (list changes, logs) are not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from approval_guard.mcp_proxy._guarded import GuardedTools

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult


def tool_schemas(listing: ListToolsResult) -> dict[str, dict[str, Any]]:
    """Each listed tool's ``inputSchema`` by name."""
    return {tool.name: dict(tool.input_schema) for tool in listing.tools}


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
