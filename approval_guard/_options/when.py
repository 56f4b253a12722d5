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
    if when is None:
        return False
    if not callable(when):
        raise ConfigurationError(
            "when must be a callable taking the bound arguments and returning a bool"
        )
    try:
        when_signature = inspect.signature(when)
    except (TypeError, ValueError):
        when_signature = None  # a builtin without one: trusted to take one argument
    if when_signature is not None:
        try:
            when_signature.bind({})
        except TypeError:
            raise ConfigurationError(
                "when must take exactly one argument, the bound arguments (a mapping of "
                "parameter name to value)"
            ) from None
    call = getattr(when, "__call__", None)  # noqa: B004 (an object with an async __call__)
    when_async = inspect.iscoroutinefunction(when) or inspect.iscoroutinefunction(call)
    if when_async and not is_async:
        raise ConfigurationError("an async when needs an async tool; use a plain function")
    return when_async


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
