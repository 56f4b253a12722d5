"""approval_guard.claude: the SDK's own query loop against a scripted CLI, no model, no process."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.frameworks import require_framework

require_framework("claude_agent_sdk")

from claude_agent_sdk import (  # noqa: E402
    ClaudeAgentOptions,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
    create_sdk_mcp_server,
    query,
    tool,
)

import approval_guard as ag  # noqa: E402
from approval_guard import claude  # noqa: E402
from approval_guard.testing import LocalProvider, approve_after, deny_after  # noqa: E402
from tests.support.claude_cli import ScriptedCLI  # noqa: E402

BASH = {"command": "rm -rf build", "description": "clean the build"}


def _run(cli: ScriptedCLI, **options: Any) -> list[Any]:
    """The SDK's query() over the scripted CLI, to the end; the messages it yielded."""

    async def collect() -> list[Any]:
        return [
            m
            async for m in query(
                prompt="clean up", options=ClaudeAgentOptions(**options), transport=cli
            )
        ]

    return asyncio.run(collect())


def _bash(ran: list[dict[str, Any]]) -> Any:
    def run(name: str, tool_input: dict[str, Any]) -> str:
        ran.append(tool_input)
        return f"{name} ran {tool_input['command']}"

    return run


def _edit_command(provider: LocalProvider, request: Any) -> None:
    provider.approve(request.id, arguments={**request.arguments, "command": "rm -rf build/tmp"})


def test_approved_edit_is_the_input_the_cli_runs(provider: LocalProvider, guard: ag.Guard) -> None:
    """The reviewer's edit comes back as updatedInput; the tool runs once with it."""
    provider.policy = _edit_command
    ran: list[dict[str, Any]] = []
    cli = ScriptedCLI([("Bash", dict(BASH))], _bash(ran))
    callback = claude.can_use_tool(
        guard, tools={"Bash": {"timeout": "1m", "editable": ("command",)}}
    )
    _run(cli, can_use_tool=callback)
    assert [{"command": "rm -rf build/tmp", "description": "clean the build"}] == ran
    assert "allow" == cli.responses[0]["response"]["behavior"]
    [request] = provider.requests()
    assert (BASH, ("command",), "Bash") == (request.arguments, request.editable, request.tool)
    assert [("Bash", False, "Bash ran rm -rf build/tmp")] == cli.model_saw


def _cancel(provider: LocalProvider, request: Any) -> None:
    provider.cancel(request.id, "withdrawn by the operator")


def _expired(provider: LocalProvider, request: Any) -> None:
    provider.approve(request.id, valid_for=0)


OUTCOMES = {
    "denied": (
        deny_after(0.05, "not on a Friday"),
        "A person denied this call to Bash: not on a Friday",
    ),
    "expired": (_expired, "The approval for Bash expired at"),
    "cancelled": (_cancel, "cancelled"),
    "no decision": (None, "so Bash did not run; it was not denied"),
}


@pytest.mark.parametrize(("policy", "sentence"), OUTCOMES.values(), ids=OUTCOMES.keys())
def test_every_other_outcome_is_a_deny_with_the_sentence(
    provider: LocalProvider, policy: Any, sentence: str
) -> None:
    """Denial, expiry, cancellation, no decision: the tool never runs; the model reads why."""
    provider.policy = policy
    guard = ag.Guard(
        base_url=provider.url,
        credential=provider.credential,
        harness_limit="3s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
    )
    ran: list[dict[str, Any]] = []
    cli = ScriptedCLI([("Bash", dict(BASH))], _bash(ran))
    _run(cli, can_use_tool=claude.can_use_tool(guard, tools={"Bash": True}))
    guard.close()
    assert [] == ran
    [(name, is_error, text)] = cli.model_saw
    assert ("Bash", True) == (name, is_error)
    assert sentence in text
    assert "deny" == cli.responses[0]["response"]["behavior"]


def test_unlisted_tools_pass_through_unchanged_by_default(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """A tool not in tools= is allowed with its own input, and nothing is sent for it."""
    ran: list[dict[str, Any]] = []
    cli = ScriptedCLI([("Read", {"command": "x", "file_path": "a"})], _bash(ran))
    _run(cli, can_use_tool=claude.can_use_tool(guard, tools={"Bash": True}))
    assert [{"command": "x", "file_path": "a"}] == ran
    assert [] == provider.requests()


def test_unlisted_deny_refuses_every_other_tool(provider: LocalProvider, guard: ag.Guard) -> None:
    """unlisted="deny" denies a tool not in tools= with a sentence that asks nobody."""
    ran: list[dict[str, Any]] = []
    cli = ScriptedCLI([("Read", {"command": "x"})], _bash(ran))
    _run(cli, can_use_tool=claude.can_use_tool(guard, tools={"Bash": True}, unlisted="deny"))
    assert [] == ran
    assert [
        (
            "Read",
            True,
            "Read is not among the tools this agent may use, so it did not run and nobody "
            "was asked.",
        )
    ] == cli.model_saw
    assert [] == provider.requests()


def test_when_false_allows_without_asking(provider: LocalProvider, guard: ag.Guard) -> None:
    """when(tool_name, input) False: allowed unasked, input unchanged."""
    ran: list[dict[str, Any]] = []
    cli = ScriptedCLI([("Bash", {"command": "ls"}), ("Bash", dict(BASH))], _bash(ran))
    provider.policy = deny_after(0.05)
    callback = claude.can_use_tool(
        guard, tools={"Bash": True}, when=lambda name, args: "rm" in args["command"]
    )
    _run(cli, can_use_tool=callback)
    assert [{"command": "ls"}] == ran
    [request] = provider.requests()
    assert BASH == request.arguments


def test_the_same_tool_use_is_allowed_at_most_once(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """Asked twice for one tool_use_id (SDK types), the second answer is a deny."""
    provider.policy = approve_after(0.05)
    callback = claude.can_use_tool(guard, tools={"Bash": True})
    context = ToolPermissionContext(tool_use_id="toolu_same")

    async def twice() -> list[Any]:
        return [await callback("Bash", dict(BASH), context) for _ in range(2)]

    first, second = asyncio.run(twice())
    assert PermissionResultAllow(updated_input=BASH) == first
    assert isinstance(second, PermissionResultDeny)
    assert "has already started or run once" in second.message
    assert 1 == len(provider.requests())


def test_an_edit_is_logged_as_run_only_when_the_tool_use_is_allowed(
    provider: LocalProvider, guard: ag.Guard, caplog: pytest.LogCaptureFixture
) -> None:
    """An edited tool use asked twice: one "runs with a reviewer's edit" line, for the allow."""
    provider.policy = _edit_command
    callback = claude.can_use_tool(guard, tools={"Bash": {"editable": ("command",)}})
    context = ToolPermissionContext(tool_use_id="toolu_edited")

    async def twice() -> list[Any]:
        return [await callback("Bash", dict(BASH), context) for _ in range(2)]

    with caplog.at_level("INFO", logger="approval_guard"):
        first, second = asyncio.run(twice())

    assert isinstance(first, PermissionResultAllow)
    assert isinstance(second, PermissionResultDeny)
    said = [r.getMessage() for r in caplog.records if "reviewer's edit" in r.getMessage()]
    assert 1 == len(said), said
    assert "rm -rf build/tmp" in said[0]


def test_a_field_name_that_cannot_be_an_argument_is_denied(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """An input field like "old-string" is never guessed at: deny, nothing sent."""
    callback = claude.can_use_tool(guard, tools={"Edit": True})
    answer = asyncio.run(
        callback("Edit", {"old-string": "a"}, ToolPermissionContext(tool_use_id="t"))
    )
    assert isinstance(answer, PermissionResultDeny)
    assert "could not be sent for approval" in answer.message
    assert [] == provider.requests()


def _edit_timeout(provider: LocalProvider, request: Any) -> None:
    provider.approve(request.id, arguments={**request.arguments, "timeout": "9"})


def test_an_edit_of_another_type_is_refused(provider: LocalProvider, guard: ag.Guard) -> None:
    """An edit that does not convert to the JSON type of the value sent: deny, no run."""
    provider.policy = _edit_timeout
    callback = claude.can_use_tool(guard, tools={"Bash": {"editable": ("timeout",)}})
    answer = asyncio.run(
        callback("Bash", {"command": "make", "timeout": 60}, ToolPermissionContext(tool_use_id="t"))
    )
    assert isinstance(answer, PermissionResultDeny)
    assert "the approved edit could not be applied" in answer.message


def test_a_cancel_from_the_cli_withdraws_the_request(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """The CLI's control_cancel_request stops the wait and cancels the pending request."""
    ran: list[dict[str, Any]] = []
    cli = ScriptedCLI([("Bash", dict(BASH))], _bash(ran), cancel_after=0.5)
    _run(cli, can_use_tool=claude.can_use_tool(guard, tools={"Bash": True}))
    assert [] == ran
    [request] = provider.requests()
    assert "cancelled" == request.status


def _refund_server(guard: ag.Guard, ran: list[dict[str, Any]]) -> Any:
    @tool("refund", "Refund part of a payment", {"payment_id": str, "amount": int})
    @guard.requires_approval(timeout="1m", on_not_run=claude.not_run_result)
    async def refund(args: dict) -> dict:  # type: ignore[type-arg]
        ran.append(args)
        return {"content": [{"type": "text", "text": f"refunded {args['amount']}"}]}

    return create_sdk_mcp_server("payments", tools=[refund])


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (approve_after(0.05), ("mcp__payments__refund", False, "refunded 4900")),
        (
            deny_after(0.05, "too much"),
            ("mcp__payments__refund", True, "A person denied this call to refund: too much"),
        ),
    ],
    ids=["approved", "denied"],
)
def test_a_guarded_sdk_mcp_tool_runs_only_when_approved(
    provider: LocalProvider, guard: ag.Guard, policy: Any, expected: tuple[str, bool, str]
) -> None:
    """@guard.requires_approval under the SDK's @tool: called through the SDK's MCP bridge."""
    provider.policy = policy
    ran: list[dict[str, Any]] = []
    name = "mcp__payments__refund"
    cli = ScriptedCLI([(name, {"payment_id": "p_1", "amount": 4900})], mcp=frozenset({name}))
    # The tool guards itself: the permission callback lets it through, unlisted.
    _run(
        cli,
        mcp_servers={"payments": _refund_server(guard, ran)},
        can_use_tool=claude.can_use_tool(guard, tools={"Bash": True}),
    )
    assert expected[:2] == cli.model_saw[0][:2]
    assert cli.model_saw[0][2].startswith(expected[2])
    assert ([{"payment_id": "p_1", "amount": 4900}] if not expected[1] else []) == ran
    [request] = provider.requests()
    assert {"args": {"payment_id": "p_1", "amount": 4900}} == request.arguments


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tools": {}},
        {"tools": {"Bash": False}},
        {"tools": {"Bash": {"exclude": ("command",)}}},
        {"tools": {"Bash": {"timeout": "0s"}}},
        {"tools": {"Bash": {"bogus": 1}}},
        {"tools": {"Bash": {"editable": ("env",), "redact": ("env.TOKEN",)}}},
        {"tools": {"Bash": {"editable": "command"}}},
        {"tools": {"Bash": {"tool": ""}}},
        {"tools": {"Bash": True}, "unlisted": "ask"},
        {"tools": {"Bash": {"when": lambda a: True}}, "when": lambda n, a: True},
    ],
    ids=[
        "empty",
        "false",
        "exclude",
        "timeout",
        "unknown",
        "redacted-and-editable",
        "editable-string",
        "empty-name",
        "unlisted",
        "two-whens",
    ],
)
def test_bad_options_raise_when_the_callback_is_made(
    guard: ag.Guard, kwargs: dict[str, Any]
) -> None:
    """Every option is checked by can_use_tool() itself, not on the first call."""
    with pytest.raises((ag.ConfigurationError, TypeError)):
        claude.can_use_tool(guard, **kwargs)


def test_a_redacted_field_is_hidden_from_the_reviewer_not_the_tool(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """redact= on an input field: the request holds a marker, the CLI gets the real value."""
    provider.policy = approve_after(0.05)
    callback = claude.can_use_tool(guard, tools={"Bash": {"redact": ("env.TOKEN",)}})
    tool_input = {"command": "deploy", "env": {"TOKEN": "s3cret-value", "STAGE": "prod"}}
    answer = asyncio.run(callback("Bash", tool_input, ToolPermissionContext(tool_use_id="t")))
    assert PermissionResultAllow(updated_input=tool_input) == answer
    [request] = provider.requests()
    assert "s3cret-value" not in str(request.arguments)
    assert "prod" == request.arguments["env"]["STAGE"]


def test_a_value_json_cannot_hold_is_denied_unsent(
    provider: LocalProvider, guard: ag.Guard
) -> None:
    """An input holding NaN cannot be shown as sent: deny, nothing sent, no value quoted."""
    callback = claude.can_use_tool(guard, tools={"Bash": True})
    tool_input = {"command": "scale", "factor": float("nan")}
    answer = asyncio.run(callback("Bash", tool_input, ToolPermissionContext(tool_use_id="t")))
    assert isinstance(answer, PermissionResultDeny)
    assert "a value in its input cannot be made JSON" in answer.message
    assert "nan" not in answer.message.lower().replace("cannot", "")
    assert [] == provider.requests()
