"""A tiny stdio MCP server for the proxy's tests: each tool call is appended to a file.

``python -m tests.support.mcp_recorder FILE``: ``write_note``, ``delete_note``
and ``read_notes`` append ``{"tool": ..., "arguments": ...}`` (the arguments
exactly as they arrived, as JSON) to FILE, one line per call, so a test can
tell whether, how often and with what a tool ran. It also offers one resource
and one prompt, to show they are relayed, and writes the names of the
``APPROVAL_GUARD_*`` variables it was given to FILE with the suffix ``.env``.
A call whose ``text`` is ``"crash now"`` is recorded, then the server exits
without answering.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(
        name="write_note",
        description="Write a note.",
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "text": {"type": "string"},
                "copies": {"type": "integer"},
                "price": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {"description": "anything at all (no type: no edit can be converted)"},
            },
            "required": ["name", "text"],
        },
        annotations=types.ToolAnnotations(destructive_hint=False),
    ),
    types.Tool(
        name="delete_note",
        description="Delete a note.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "token": {"type": "string"}},
            "required": ["name"],
        },
        annotations=types.ToolAnnotations(destructive_hint=True),
    ),
    types.Tool(
        name="read_notes",
        description="Read every note.",
        input_schema={"type": "object", "properties": {}},
        output_schema={"type": "object", "properties": {"count": {"type": "integer"}}},
    ),
]


def main(record: Path) -> None:
    # What of the guard's environment the child was given (the proxy gives it none).
    seen = sorted(name for name in os.environ if name.startswith("APPROVAL_GUARD_"))
    record.with_suffix(".env").write_text(json.dumps(seen), encoding="utf-8")

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        with record.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"tool": params.name, "arguments": arguments}) + "\n")
        if arguments.get("text") == "crash now":
            os._exit(3)  # the server dies with the call in hand
        if params.name == "read_notes":
            await ctx.session.report_progress(0.5, 1.0, "reading notes")  # a no-op without a token
            count = len(record.read_text(encoding="utf-8").splitlines())
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"{count} calls")],
                structured_content={"count": count},
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{params.name} done: {arguments}")]
        )

    async def list_resources(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[types.Resource(uri="note://index", name="index", mime_type="text/plain")]
        )

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text="the index of notes")]
        )

    async def list_prompts(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="summarize")])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        text = types.TextContent(type="text", text="Summarize the notes.")
        return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])

    server: Server[Any] = Server(
        "recorder",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
