"""Guarding a tool whose arguments arrive as one JSON object (a framework's tool input).

Some frameworks hand a permission hook the call's input as a dict, with no Python
signature of ours behind it: the Claude Agent SDK's ``can_use_tool`` (``"Bash"``,
``{"command": ...}``), Google ADK's ``before_tool_callback``. :class:`InputGuard`
makes each such call an ordinary guarded call: a function is built for the call
whose keyword-only parameters are the input's fields, and goes through
``Guard.requires_approval`` like any tool, so every rule is the core's own
(expiry checked last, the execution record claimed, redaction, edits converted,
honest ``NotRun``). The request's arguments are the input's fields; what the
"tool" does when approved is ``run(input)``, with a reviewer's edits in place.

An editable field's type is the JSON type of the value sent (``str``, ``int``,
``float``, ``bool``, ``list``, ``dict``): an edit must convert exactly to it, or
the call does not run. A field whose name cannot be a Python parameter name is
never guessed at: the call does not run.
"""

from __future__ import annotations

import inspect
import keyword
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from approval_guard._call.outcome import NotRun, Reason
from approval_guard._decorator import Decorator
from approval_guard._options.advice import advice_for
from approval_guard._options.options import ApprovalOptions, check_names
from approval_guard.exceptions import ArgumentSerializationError, ConfigurationError

if TYPE_CHECKING:
    from approval_guard._guard import Guard

__all__ = ["InputGuard", "check_tools", "input_options"]

log = logging.getLogger("approval_guard")

R = TypeVar("R")
N = TypeVar("N")

#: The annotation an editable field gets from the JSON type of the value sent.
_JSON_TYPES: dict[type, type] = {
    bool: bool,
    int: int,
    float: float,
    str: str,
    list: list,
    dict: dict,
}


def input_options(options: object, where: str) -> ApprovalOptions:
    """One tool's options for :class:`InputGuard` (``True`` for the defaults), checked."""
    if options is True:
        return {}
    if not isinstance(options, Mapping):
        raise ConfigurationError(
            f"{where} must be True or a dict of requires_approval options, "
            f"not {type(options).__name__}"
        )
    check_names(options)
    if "exclude" in options:
        raise ConfigurationError(
            f"{where}: exclude is not available for a tool whose input is one object: every "
            "field is shown to the reviewer (use redact to hide a value)"
        )
    return dict(options)  # type: ignore[return-value]


def check_tools(tools: object) -> dict[str, ApprovalOptions]:
    """``tools={name: True or options}``, checked: a non-empty mapping of tool names."""
    if not isinstance(tools, Mapping) or not tools:
        raise ConfigurationError(
            "tools must be a non-empty dict of tool name to True or a dict of options"
        )
    checked: dict[str, ApprovalOptions] = {}
    for name, options in tools.items():
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            raise ConfigurationError("tools must be keyed by tool names of 1 to 200 characters")
        checked[name] = input_options(options, f"tools[{name!r}]")
    return checked


class InputGuard(Generic[N]):
    """One tool's calls, each an input dict, guarded by ``guard`` with ``options``.

    Every option is checked here (a bad one raises ``ConfigurationError``), so
    nothing about the options can fail on a call::

        refund = InputGuard(guard, "refund", options={"editable": ("amount",)}, on_not_run=str)
        out = await refund.acall({"payment_id": "p_1", "amount": 4900}, run)
    """

    def __init__(
        self,
        guard: Guard,
        tool: str,
        *,
        options: ApprovalOptions,
        on_not_run: Callable[[NotRun], N] | None = None,
    ) -> None:
        options = input_options(options, f"the options of {tool!r}")
        self._guard = guard
        shown = options.get("tool")
        self._name = tool if shown is None else shown
        self._on_not_run = on_not_run
        # Every option checked now by the one builder (redacted and editable at once too).
        Decorator(lambda: guard, on_not_run=on_not_run, options={**options, "tool": self._name})
        self._options = options
        self._editable = _names(options.get("editable", ()), "editable")
        redact = options.get("redact")
        self._redact_paths = (
            None if redact is None or callable(redact) else _names(redact, "redact")
        )
        messages = options.get("messages")
        self._messages: Mapping[Reason, str] = messages or {}

    @property
    def name(self) -> str:
        """The tool's name as the reviewer sees it."""
        return self._name

    def refused(self, why: str) -> N | NotRun:
        """A call that cannot be sent for approval: it does not run, and says why."""
        log.error("a call to %s was not sent for approval: %s", self._name, why)
        not_run = NotRun(
            reason=Reason.NOT_OBTAINED,
            message=f"The call to {self._name} could not be sent for approval ({why}), so it "
            "did not run.",
            tool=self._name,
            advice=advice_for(Reason.NOT_OBTAINED, self._messages, refused=True),
        )
        return not_run if self._on_not_run is None else self._on_not_run(not_run)

    async def acall(
        self, input: Mapping[str, Any], run: Callable[[dict[str, Any]], Awaitable[R]]
    ) -> R | N | NotRun:
        """Ask for approval of ``input``; approved, return ``await run(approved input)``."""
        guarded, refusal = self._guarded(input, run)
        if guarded is None:
            return refusal  # type: ignore[no-any-return]
        try:
            result: R | N | NotRun = await guarded(**input)
        except (ConfigurationError, ArgumentSerializationError) as exc:
            return self.refused(_why(exc))
        return result

    def call(self, input: Mapping[str, Any], run: Callable[[dict[str, Any]], R]) -> R | N | NotRun:
        """Ask for approval of ``input``; approved, return ``run(approved input)``."""
        guarded, refusal = self._guarded(input, run)
        if guarded is None:
            return refusal  # type: ignore[no-any-return]
        try:
            result: R | N | NotRun = guarded(**input)
        except (ConfigurationError, ArgumentSerializationError) as exc:
            return self.refused(_why(exc))
        return result

    def _guarded(
        self, input: Mapping[str, Any], run: Callable[[dict[str, Any]], Any]
    ) -> tuple[Callable[..., Any] | None, Any]:
        """This call's guarded function, or None and the refusal (why it cannot be sent)."""
        if not isinstance(input, Mapping):  # a framework's input, whatever its annotation
            return None, self.refused(  # type: ignore[unreachable]
                f"its input is a {type(input).__name__}, not an object"
            )
        for key in input:
            if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
                shown = repr(key)[:60]
                return None, self.refused(
                    f"its input has a field named {shown}, which approval_guard cannot send "
                    "as an argument"
                )
        annotations: dict[str, Any] = {}
        editable = set()
        for name in self._editable:
            if name not in input:
                continue
            annotation = _JSON_TYPES.get(type(input[name]))
            if annotation is None:
                log.warning(
                    "%s: the field %r holds %s, whose type an edit cannot be converted to, so "
                    "it is not editable in this call",
                    self._name,
                    name,
                    type(input[name]).__name__,
                )
                continue
            annotations[name] = annotation
            editable.add(name)
        options: ApprovalOptions = {**self._options, "tool": self._name, "editable": editable}
        if self._redact_paths is not None:
            options["redact"] = [p for p in self._redact_paths if p.split(".")[0] in input]
        fn = _function(self._name, input, annotations, editable, run)
        try:
            decorator: Decorator[Any] = Decorator(
                lambda: self._guard, on_not_run=self._on_not_run, options=options
            )
            return decorator(fn), None
        except ConfigurationError as exc:
            return None, self.refused(_why(exc))


def _function(
    name: str,
    input: Mapping[str, Any],
    annotations: Mapping[str, Any],
    editable: Collection[str],
    run: Callable[[dict[str, Any]], Any],
) -> Callable[..., Any]:
    """A function whose keyword-only parameters are the input's fields; calling it runs ``run``."""
    params = [
        inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, annotation=annotations.get(key, Any))
        for key in input
    ]
    if inspect.iscoroutinefunction(run):

        async def body(**fields: Any) -> Any:
            return await run(dict(fields))

        fn: Any = body
    else:

        def sync_body(**fields: Any) -> Any:
            return run(dict(fields))

        fn = sync_body
    fn.__signature__ = inspect.Signature(params)
    fn.__annotations__ = {key: annotations[key] for key in editable if key in annotations}
    fn.__name__ = fn.__qualname__ = name
    return fn  # type: ignore[no-any-return]


def _names(value: object, option: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigurationError(f"{option} must be a collection of names, not a string")
    try:
        names: tuple[object, ...] = tuple(value)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigurationError(f"{option} must be a collection of field names") from None
    if not all(isinstance(name, str) and name for name in names):
        raise ConfigurationError(f"{option} must be a collection of field names (strings)")
    return names  # type: ignore[return-value]


def _why(exc: Exception) -> str:
    if isinstance(exc, ArgumentSerializationError):
        # Its text may quote a value: the model and the log get only what kind of fault.
        return "a value in its input cannot be made JSON"
    text = str(exc).split("\n")[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
