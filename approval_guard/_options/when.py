"""``when=``: checked at decoration, and asked before each call whether it needs approval."""

from __future__ import annotations

import inspect
import logging
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from approval_guard.exceptions import ConfigurationError

if TYPE_CHECKING:
    from approval_guard._options.spec import ToolSpec

log = logging.getLogger("approval_guard")


def check_when(when: object, *, is_async: bool) -> bool:
    """``when`` checked at decoration: a callable of one argument. True if it is async."""
    return check_of_arguments(
        when, option="when", returns="a bool", is_async=is_async, name="the bound arguments"
    )


def check_of_arguments(fn: object, *, option: str, returns: str, is_async: bool, name: str) -> bool:
    """An option that is a callable of a call's arguments (``when``, ``describe``).

    Checked at decoration: None, or a callable that takes exactly one argument
    (``name``, a mapping of parameter name to value), async only for an async
    tool. True if it is async.
    """
    if fn is None:
        return False
    if not callable(fn):
        raise ConfigurationError(
            f"{option} must be a callable taking {name} and returning {returns}"
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None  # a builtin without one: trusted to take one argument
    if signature is not None:
        try:
            signature.bind({})
        except TypeError:
            raise ConfigurationError(
                f"{option} must take exactly one argument, {name} (a mapping of "
                "parameter name to value)"
            ) from None
    call = getattr(fn, "__call__", None)  # noqa: B004 (an object with an async __call__)
    fn_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)
    if fn_async and not is_async:
        raise ConfigurationError(f"an async {option} needs an async tool; use a plain function")
    return fn_async


def asks(spec: ToolSpec, bound: dict[str, Any]) -> bool:
    """``when``'s verdict: False only for an explicit ``False``; anything doubtful asks."""
    when = spec.when
    assert when is not None
    try:
        verdict = when(MappingProxyType(bound))
    except Exception:
        log.warning("when= of %s raised; asking for approval", spec.name, exc_info=True)
        return True
    return _verdict(spec, verdict)


async def asks_async(spec: ToolSpec, bound: dict[str, Any]) -> bool:
    """:func:`asks` for an async ``when``."""
    when = spec.when
    assert when is not None
    try:
        verdict = when(MappingProxyType(bound))
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception:
        log.warning("when= of %s raised; asking for approval", spec.name, exc_info=True)
        return True
    return _verdict(spec, verdict)


def _verdict(spec: ToolSpec, verdict: object) -> bool:
    if verdict is False:
        return False
    if verdict is True:
        return True
    close = getattr(verdict, "close", None)
    if inspect.iscoroutine(verdict) and callable(close):
        close()  # never awaited: closed, so it warns nobody
    log.warning(
        "when= of %s returned a %s, not a bool; asking for approval",
        spec.name,
        type(verdict).__name__,
    )
    return True
