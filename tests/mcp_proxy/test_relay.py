"""What the proxy relays unchanged: tool lists, unguarded calls, resources, prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.frameworks import require_framework

require_framework("mcp")

import anyio  # noqa: E402
import pytest  # noqa: E402

from approval_guard.testing import LocalProvider  # noqa: E402
from tests.support.mcp_proxy import (  # noqa: E402
    RECORDER,
    proxied,
    recorded,
    session,
    third_party,
)


def _tools(listing: Any) -> list[dict[str, Any]]:
    return [tool.model_dump(by_alias=True, exclude_none=True) for tool in listing.tools]


def _lists(provider: LocalProvider, child: list[str]) -> tuple[list[Any], list[Any]]:
    async def both() -> tuple[list[Any], list[Any]]:
        async with session(child) as direct:
            own = _tools(await direct.list_tools())
        async with proxied(provider, ["--guard", "*"], child) as client:
            relayed = _tools(await client.list_tools())
        return own, relayed

    return anyio.run(both)


@pytest.mark.parametrize(
    "child",
    [
        pytest.param(lambda record: [*RECORDER, str(record)], id="recorder"),
        pytest.param(lambda record: third_party("mcp-server-time"), id="mcp-server-time"),
        pytest.param(lambda record: third_party("mcp-server-fetch"), id="mcp-server-fetch"),
    ],
)
def test_the_tool_list_is_the_childs_own(provider: LocalProvider, record: Path, child: Any) -> None:
    """tools/list through the proxy is the child's own (fetch lists its tools without network)."""
    own, relayed = _lists(provider, child(record))
    assert own == relayed
    assert own  # the server lists tools at all


def test_the_tool_list_keeps_output_schemas_and_annotations(
    provider: LocalProvider, record: Path
) -> None:
    """The relayed tools carry the child's outputSchema and annotations, not just names."""
    _, relayed = _lists(provider, [*RECORDER, str(record)])
    by_name = {tool["name"]: tool for tool in relayed}
    assert {"type": "object", "properties": {"count": {"type": "integer"}}} == by_name[
        "read_notes"
    ]["outputSchema"]
    assert {"destructiveHint": True} == by_name["delete_note"]["annotations"]


def test_an_unguarded_tool_runs_without_a_request(provider: LocalProvider, record: Path) -> None:
    """A tool no --guard pattern matches is relayed at once: no request, the child's result."""

    async def call() -> Any:
        async with proxied(provider, ["--guard", "write_*"], [*RECORDER, str(record)]) as client:
            return await client.call_tool("read_notes", {})

    result = anyio.run(call)
    assert not result.is_error
    assert {"count": 1} == result.structured_content
    assert [{"tool": "read_notes", "arguments": {}}] == recorded(record)
    assert [] == provider.requests()


def test_an_unguarded_tools_progress_reaches_the_client(
    provider: LocalProvider, record: Path
) -> None:
    """The child's own progress notifications for an unguarded call are relayed to the client."""
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async def call() -> Any:
        async with proxied(provider, ["--guard", "write_*"], [*RECORDER, str(record)]) as client:
            return await client.call_tool("read_notes", {}, progress_callback=on_progress)

    assert not anyio.run(call).is_error
    assert [(0.5, 1.0, "reading notes")] == heard


def test_the_child_is_given_none_of_the_guards_environment(
    provider: LocalProvider, record: Path
) -> None:
    """The proxy has APPROVAL_GUARD_URL and the credential; the child it starts has neither."""

    async def listed() -> None:
        async with proxied(provider, ["--guard", "*"], [*RECORDER, str(record)]) as client:
            await client.list_tools()

    anyio.run(listed)
    assert [] == json.loads(record.with_suffix(".env").read_text(encoding="utf-8"))


def test_an_unguarded_third_party_tool_runs(provider: LocalProvider) -> None:
    """mcp-server-time's get_current_time, not matched by --guard, answers through the proxy."""

    async def call() -> Any:
        async with proxied(provider, ["--guard", "convert_*"], third_party("mcp-server-time")) as c:
            return await c.call_tool("get_current_time", {"timezone": "Etc/UTC"})

    result = anyio.run(call)
    assert not result.is_error
    assert "Etc/UTC" == result.structured_content["timezone"]
    assert [] == provider.requests()


def test_resources_and_prompts_are_relayed(provider: LocalProvider, record: Path) -> None:
    """resources/list, resources/read, prompts/list and prompts/get are relayed to the child."""

    async def calls() -> tuple[Any, Any, Any, Any]:
        async with proxied(provider, ["--guard", "*"], [*RECORDER, str(record)]) as client:
            return (
                await client.list_resources(),
                await client.read_resource("note://index"),
                await client.list_prompts(),
                await client.get_prompt("summarize"),
            )

    resources, read, prompts, prompt = anyio.run(calls)
    assert ["note://index"] == [str(r.uri) for r in resources.resources]
    assert "the index of notes" == read.contents[0].text
    assert ["summarize"] == [p.name for p in prompts.prompts]
    assert "Summarize the notes." == prompt.messages[0].content.text
    assert [] == provider.requests()
