"""``ApprovalMiddleware``: LangChain agents' tool calls decided at the approval provider.

The shape of ``HumanInTheLoopMiddleware`` (``interrupt_on={tool: ...}``), but
no interrupt: ``wrap_tool_call`` holds each reviewed call while a person
decides at the provider, then runs it (as sent, or with the reviewer's
arguments) or returns a ``ToolMessage`` with the ``NotRun``'s sentence. Each
call is one guarded call of the core, so the expiry is checked right before the
tool starts, the execution record allows one run per approval, and every
reason a call did not run is told as it is.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command
from pydantic import BaseModel

from approval_guard._call.outcome import NotRun
from approval_guard._codec.serialize import dumps
from approval_guard._guard import Guard
from approval_guard._harness import in_batch
from approval_guard._options.converters import EditError
from approval_guard._options.redact import redacted_names
from approval_guard._options.schema_check import refused_edit
from approval_guard._options.shape import from_names
from approval_guard._options.spec import build_spec
from approval_guard._options.tool_table import schema_arguments
from approval_guard.exceptions import ConfigurationError
from approval_guard.langchain._review import Review, reviews

if TYPE_CHECKING:
    # Only a type here: langchain 1.0 defines it in langchain.tools.tool_node.
    from langchain.agents.middleware.types import ToolCallRequest

Result = ToolMessage | Command[Any]

#: Told to the model before the result of a call that ran with a reviewer's arguments.
EDIT_NOTICE = (
    "Note: a human reviewer changed this tool call's arguments before it ran; the call in "
    "your message is the one you produced, not the one that executed. Do not re-issue it."
)


class ApprovalMiddleware(AgentMiddleware):
    """Each call of the tools in ``interrupt_on`` waits for a person's decision at the provider.

    ::

        agent = create_agent(
            model,
            tools=[issue_refund, lookup_order],
            middleware=[
                ApprovalMiddleware(
                    guard,
                    interrupt_on={
                        "issue_refund": {"allowed_decisions": ["approve", "edit", "reject"]},
                        "lookup_order": False,
                    },
                    timeout="30m",
                )
            ],
        )

    ``interrupt_on`` is ``HumanInTheLoopMiddleware``'s: ``True`` (approve, edit
    and reject), ``False`` (not reviewed) or ``{"allowed_decisions": [...],
    "when": predicate}``, with ``requires_approval``'s options too (``timeout``,
    ``redact``, ``messages``, ...); ``options`` are those shared by every tool.
    Approve is the provider's approval as sent; "edit" makes every argument
    editable, and an approval with changed arguments runs the tool with them once
    the tool's own schema accepts them; reject is a denial. No checkpointer is
    needed: the agent does not pause, the tool call waits. ``edit_notice`` is
    put before the result of a call that ran with changed arguments (``None``:
    nothing).

    Args:
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        interrupt_on: Each reviewed tool's name -> ``True``, ``False`` or a config dict
            (``allowed_decisions``, ``when`` and ``requires_approval``'s options), as
            ``HumanInTheLoopMiddleware`` takes it.
        edit_notice: What the model is told when a reviewer changed the arguments (None: nothing).
        batch: Send each request's turn id as API 1.3's ``batch`` (the id of the
            ``AIMessage`` that asked for the call), so a reviewer sees one model turn's
            calls together; ``False`` for a provider older than 1.3, which refuses it.
        **options: ``requires_approval``'s options shared by every reviewed tool.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        interrupt_on: Mapping[str, bool | Mapping[str, Any]],
        edit_notice: str | None = EDIT_NOTICE,
        batch: bool = True,
        **options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(guard, Guard):
            raise ConfigurationError(f"guard must be an approval_guard.Guard, not {guard!r}")
        if edit_notice is not None and not isinstance(edit_notice, str):
            raise ConfigurationError("edit_notice must be a string or None")
        if not isinstance(batch, bool):
            raise ConfigurationError("batch must be True or False")
        self._batch = batch
        self._guard = guard
        self._reviews = reviews(interrupt_on, options)
        self._edit_notice = edit_notice

    @property
    def interrupt_on(self) -> dict[str, Review]:
        """The reviewed tools and how each is reviewed (checked when the middleware was made)."""
        return dict(self._reviews)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]
    ) -> Result:
        """Run the call once a person approves it at the provider; else say why it did not run.

        Args:
            request: LangChain's tool call request.
            handler: Runs the call (LangChain's next step).
        """
        review = self._review(request)
        if review is None:
            return handler(request)

        def run(**arguments: Any) -> Result:
            to_run, edited = _with_arguments(request, arguments)
            return self._noticed(handler(to_run), edited)

        spec = self._spec(request, review, run)
        with in_batch(self._turn(request)):
            result: Result = self._guard._call_sync(spec, (), dict(request.tool_call["args"]))
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Result]],
    ) -> Result:
        """``wrap_tool_call`` for an async agent: the wait is on the event loop.

        Args:
            request: LangChain's tool call request.
            handler: Runs the call (LangChain's next step), awaited.
        """
        review = self._review(request)
        if review is None:
            return await handler(request)

        async def run(**arguments: Any) -> Result:
            to_run, edited = _with_arguments(request, arguments)
            return self._noticed(await handler(to_run), edited)

        spec = self._spec(request, review, run)
        with in_batch(self._turn(request)):
            result: Result = await self._guard._call_async(
                spec, (), dict(request.tool_call["args"])
            )
        return result

    # -- one call ------------------------------------------------------------

    def _turn(self, request: ToolCallRequest) -> str | None:
        """The id of the model turn (its ``AIMessage``) that asked for this call, if known."""
        return turn_id(request) if self._batch else None

    def _review(self, request: ToolCallRequest) -> Review | None:
        """This call's review, or None when it runs unreviewed (not listed, or ``when`` said no)."""
        review = self._reviews.get(request.tool_call["name"])
        if review is None or review.when is None:
            return review
        try:
            ask = review.when(request)
        except Exception:
            return review  # a predicate that fails means ask, as requires_approval(when=)
        return None if ask is False else review

    def _spec(self, request: ToolCallRequest, review: Review, run: Callable[..., Any]) -> Any:
        tool_call = request.tool_call
        args = tool_call["args"]
        declared = _arguments(request)
        options = dict(review.options)
        if review.edit:
            hidden = redacted_names(_paths(options.get("redact"))) | set(options.get("exclude", ()))
            options["editable"] = sorted((declared | set(args)) - hidden)

        def not_run(outcome: NotRun) -> ToolMessage:
            return ToolMessage(
                content=str(outcome),
                name=tool_call["name"],
                # A call without an id still gets its answer (it cannot run without one).
                tool_call_id=str(tool_call.get("id") or ""),
                status="error",
            )

        name = tool_call["name"]
        return build_spec(
            from_names(run, options.get("tool") or name, declared | set(args)),
            options=options,
            on_not_run=not_run,
            check_edit=_revalidate(request) if review.edit else None,
            name=name,
        )

    def _noticed(self, result: Result, edited: bool) -> Result:
        notice = self._edit_notice
        if not edited or not notice or not isinstance(result, ToolMessage):
            return result
        if isinstance(result.content, str):
            return result.model_copy(update={"content": f"{notice}\n\n{result.content}"})
        return result.model_copy(update={"content": [notice, *result.content]})


def turn_id(request: ToolCallRequest) -> str | None:
    """The id of the ``AIMessage`` whose ``tool_calls`` hold this call (None: not found)."""
    call_id = request.tool_call.get("id")
    state = request.state
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if messages is None:
        messages = getattr(state, "messages", None)
    if not call_id or not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(
            call.get("id") == call_id for call in message.tool_calls
        ):
            return message.id if isinstance(message.id, str) else None
    return None


def _with_arguments(request: ToolCallRequest, arguments: dict[str, Any]) -> tuple[Any, bool]:
    """The request to run: unchanged, or with the reviewer's arguments (plain JSON)."""
    if arguments == request.tool_call["args"]:
        return request, False
    plain = json.loads(dumps(arguments))
    return request.override(tool_call={**request.tool_call, "args": plain}), True


def _arguments(request: ToolCallRequest) -> frozenset[str]:
    """The argument names the tool shows the model (its ``tool_call_schema``)."""
    tool = request.tool
    schema = getattr(tool, "tool_call_schema", None) if tool is not None else None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return frozenset(schema.model_fields)
    return schema_arguments(schema)


def _paths(redact: object) -> Any:
    """``redact`` as the core's paths (a callable's names are unknown: none)."""
    if redact is None or callable(redact):
        return None
    return tuple(tuple(str(path).split(".")) for path in redact)  # type: ignore[attr-defined]


def _revalidate(request: ToolCallRequest) -> Callable[[dict[str, Any]], Mapping[str, Any]]:
    """The tool's own schema over the call with a reviewer's edits in place."""
    tool = request.tool
    schema = getattr(tool, "tool_call_schema", None) if tool is not None else None

    def check(edits: dict[str, Any]) -> Mapping[str, Any]:
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise EditError("the tool has no Pydantic schema to check an edit against")
        merged = {**request.tool_call["args"], **edits}
        try:
            schema.model_validate_json(dumps(merged))
        except Exception as exc:
            raise refused_edit(exc) from None
        return merged

    return check
