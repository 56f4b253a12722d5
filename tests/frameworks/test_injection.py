"""Recognising framework-injected parameters by type, without importing any framework."""

# The frameworks' classes are stand-ins made at run time, which mypy cannot use as types.
# mypy: disable-error-code="valid-type,index"

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from typing import Annotated, Any, Generic, TypeVar, Union

import pytest

import approval_guard as ag
from approval_guard._options.inject import injected_parameters

T = TypeVar("T")


def _named(module: str, qualname: str, *bases: type) -> Any:
    """A stand-in class that looks, by module and name, like a framework's."""
    cls = types.new_class(qualname, bases or (Generic[T],))
    cls.__module__, cls.__qualname__ = module, qualname
    return cls


RunContextWrapper = _named("agents.run_context", "RunContextWrapper")
ToolContext = _named("agents.tool_context", "ToolContext", RunContextWrapper[T])
RunnableConfig = _named("langchain_core.runnables.config", "RunnableConfig", dict)
BaseCallbackHandler = _named("langchain_core.callbacks.base", "BaseCallbackHandler", object)
BaseCallbackManager = _named("langchain_core.callbacks.base", "BaseCallbackManager", object)
InjectedToolArg = _named("langchain_core.tools.base", "InjectedToolArg", object)
InjectedToolCallId = _named("langchain_core.tools.base", "InjectedToolCallId", InjectedToolArg)
McpContext = _named("mcp.server.mcpserver.context", "Context")
OtherContext = _named("myapp.models", "Context")  # same name, not a framework's
# LangChain's Callbacks alias, as it spells it.
Callbacks = Union[list[BaseCallbackHandler], BaseCallbackManager, None]  # noqa: UP007


def _injected(annotation: Any) -> bool:
    def tool(value, other: int) -> None: ...  # type: ignore[no-untyped-def]

    tool.__annotations__ = {"value": annotation, "other": int}
    return "value" in injected_parameters(tool, inspect.signature(tool))


def _stable_id(annotation: object) -> str:
    """The annotation's repr without memory addresses, the same in every pytest-xdist worker."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(annotation))


@pytest.mark.parametrize(
    "annotation",
    [
        RunContextWrapper,
        RunContextWrapper[int],
        ToolContext[int],
        Union[RunContextWrapper[int], None],  # noqa: UP007
        RunContextWrapper[int] | None,
        RunnableConfig,
        Callbacks,
        Annotated[str, InjectedToolArg],
        Annotated[str, InjectedToolCallId],
        Annotated[str, InjectedToolArg()],
        Annotated[RunnableConfig, "the run's config"],
        McpContext,
    ],
    ids=_stable_id,
)
def test_framework_types_are_recognised(annotation: Any) -> None:
    """Framework context types, their subclasses, generics, optionals and markers are injected."""
    assert _injected(annotation)


@pytest.mark.parametrize(
    "annotation",
    [
        str,
        int,
        dict[str, Any],
        OtherContext,
        str | RunnableConfig,
        Annotated[str, "a doc"],
        "NoSuch",
    ],
    ids=repr,
)
def test_other_types_are_sent_for_approval(annotation: Any) -> None:
    """Ordinary types, a same-named class elsewhere, mixed unions and unresolvable names are not."""
    assert not _injected(annotation)


def run_with_context(
    ctx: RunContextWrapper[int],
    payment_id: str,
    when: NoSuchName,  # type: ignore[name-defined]  # noqa: F821
) -> None:
    """String annotations (this module has ``from __future__ import annotations``)."""


def test_string_annotations_are_resolved_one_by_one() -> None:
    """One unresolvable annotation does not hide a resolvable injected one."""
    assert {"ctx"} == injected_parameters(run_with_context, inspect.signature(run_with_context))


def test_unresolvable_type_arguments_do_not_hide_the_context() -> None:
    """RunContextWrapper[LocalDeps], LocalDeps local to a function, is still the run context."""

    class LocalDeps:
        user = "ann"

    def lookup(
        ctx: RunContextWrapper[LocalDeps], mixed: RunContextWrapper[LocalDeps] | str
    ) -> None:
        """Neither annotation can be evaluated whole in the module's namespace."""

    assert {"ctx"} == injected_parameters(lookup, inspect.signature(lookup))


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_guard_leaves_out_injected_and_excluded_parameters(sync: bool) -> None:
    """requires_approval excludes recognised parameters as well as the ones it is told."""
    guard = ag.Guard(base_url="http://127.0.0.1:9", credential="agi_token")

    def lookup(ctx: RunContextWrapper[int], order_id: str, trace: str) -> None: ...

    async def lookup_async(ctx: RunContextWrapper[int], order_id: str, trace: str) -> None: ...

    fn: Callable[..., Any] = lookup if sync else lookup_async
    guarded = guard.requires_approval(timeout="1m", exclude=("trace",))(fn)
    assert frozenset({"ctx", "trace"}) == guarded.__approval_guard__.exclude  # type: ignore[attr-defined]
