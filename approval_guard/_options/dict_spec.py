"""A tool known by its arguments' names (a framework's schema), not by a Python signature.

Agent frameworks hand a call over as a tool name and a dict of arguments that
the framework has validated against the tool's own schema (a Pydantic AI
toolset's tool, a LangChain tool in a middleware). Such a call is guarded by the
same rules as a decorated function: :func:`dict_spec` makes the
:class:`~approval_guard._options.spec.ToolSpec` of one call, whose function
takes the arguments as keywords. An edit is plain JSON checked here, then
checked whole by the framework's validator (``check_edit``) before the
execution record is claimed, so what the framework's schema refuses never runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs

from approval_guard._call.outcome import NotRun
from approval_guard._options.converters import Converter, entry
from approval_guard._options.options import DEFAULT_TIMEOUT, ApprovalOptions, check_names
from approval_guard._options.redact import check_redact, redacted_names
from approval_guard._options.spec import ToolSpec, make_spec
from approval_guard.exceptions import ConfigurationError

__all__ = ["check_dict_options", "dict_spec"]


def _as_sent(value: Any, path: str) -> Any:
    """An edit's JSON as it came (already checked plain): the framework's schema converts it."""
    return value


def _names(value: object, option: str) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise ConfigurationError(f"{option} must be a collection of argument names, not a string")
    try:
        names: tuple[object, ...] = tuple(value)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigurationError(f"{option} must be a collection of argument names") from None
    checked = [name for name in names if isinstance(name, str) and name]
    if len(checked) != len(names):
        raise ConfigurationError(f"{option} must list argument names as non-empty strings")
    return tuple(sorted(set(checked)))


def check_dict_options(options: Mapping[str, Any], *, tool: str) -> None:
    """Check a dict tool's options now, without its schema; a bad one raises ConfigurationError.

    Names (``redact``, ``editable``, ``exclude``) are checked against the
    tool's arguments when its schema is known (:func:`dict_spec`).
    """
    check_names(options)
    _names(options.get("exclude", ()), "exclude")
    _names(options.get("editable", ()), "editable")
    redact = options.get("redact")
    if redact is not None and not callable(redact):
        _names(redact, "redact")
    _spec(_probe, options, tool, None)


async def _probe(**arguments: Any) -> None:
    """Stand-in used to check a dict tool's options before its schema is known."""


def _spec(
    fn: Callable[..., Any],
    options: Mapping[str, Any],
    tool: str,
    on_not_run: Callable[[NotRun], Any] | None,
) -> ToolSpec:
    """The options a signature does not matter to, checked by the core's make_spec."""
    return make_spec(
        fn,
        on_not_run=on_not_run,
        options={
            "timeout": options.get("timeout", DEFAULT_TIMEOUT),
            "tool": options.get("tool") or tool,
            "when": options.get("when"),
            "describe": options.get("describe"),
            "on_event": options.get("on_event"),
            "messages": options.get("messages"),
        },
    )


def dict_spec(
    name: str,
    run: Callable[..., Any],
    *,
    arguments: Collection[str],
    options: ApprovalOptions | Mapping[str, Any],
    on_not_run: Callable[[NotRun], Any] | None = None,
    check_edit: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
) -> ToolSpec:
    """The spec of one call of a dict tool; ``run(**arguments)`` runs it once approved.

    ``arguments``: the names the tool's schema declares (and the call's own);
    ``redact``, ``editable`` and ``exclude`` must name some of them.
    ``check_edit`` gets the edited names' JSON values and returns what the tool
    gets instead (raising :class:`~approval_guard._options.converters.EditError`
    refuses the edit: the tool does not run).
    """
    known = frozenset(arguments)
    where = options.get("tool") or name
    exclude = frozenset(_names(options.get("exclude", ()), "exclude"))
    unknown = sorted(exclude - known)
    if unknown:
        raise ConfigurationError(f"exclude names arguments that {where} does not have: {unknown}")
    redaction = check_redact(options.get("redact"), known, exclude, where)
    editable = _names(options.get("editable", ()), "editable")
    for arg in editable:
        if arg not in known:
            raise ConfigurationError(f"editable names {arg!r}, which is not an argument of {where}")
        if arg in exclude:
            raise ConfigurationError(
                f"editable names {arg!r}, which is excluded and never sent for approval"
            )
    both = sorted(set(editable) & redacted_names(redaction))
    if both:
        raise ConfigurationError(
            f"{both[0]!r} is both redacted and editable: a reviewer cannot edit a value "
            "they cannot see"
        )
    spec = _spec(run, options, name, on_not_run)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if args:
            raise TypeError(f"{where} takes its arguments by name only")
        return {key: value for key, value in kwargs.items() if key not in exclude}

    converters: dict[str, Converter] = {arg: entry(arg, _as_sent) for arg in editable}
    return attrs.evolve(
        spec,
        exclude=exclude,
        bind=bind,
        redact=redaction,
        editable=editable,
        converters=converters,
        check_edit=check_edit,
        by_name=True,  # run(**arguments): an edit replaces keywords, no signature
    )
