"""What ``requires_approval(...)`` returns: validated options waiting for a function."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from approval_guard._call.outcome import NotRun
from approval_guard._options.options import ApprovalOptions, check_names
from approval_guard._options.shape import from_signature, unknown_tool
from approval_guard._options.spec import build_spec

if TYPE_CHECKING:
    from approval_guard._guard import Guard

P = ParamSpec("P")
R = TypeVar("R")
#: What a guarded call returns instead of a NotRun (NotRun itself unless on_not_run is given).
N = TypeVar("N")


class Decorator(Generic[N]):
    """What ``requires_approval(...)`` returns: validated options waiting for a function.

    ``N`` is what a call that did not run returns: ``NotRun``, or what
    ``on_not_run`` makes of it.
    """

    def __init__(
        self,
        guard: Callable[[], Guard],
        *,
        on_not_run: Callable[[NotRun], N] | None = None,
        options: ApprovalOptions,
    ) -> None:
        check_names(options)
        self._guard = guard
        self._on_not_run = on_not_run
        self._options = options
        # Every option checked now, by the one builder, before the function is known:
        # a bad option raises at decoration; names are checked against fn later.
        build_spec(unknown_tool(), options=options, on_not_run=on_not_run, name="probe")

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, R]]
    ) -> Callable[P, Coroutine[Any, Any, R | N]]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R | N]: ...

    def __call__(self, fn: Callable[..., Any]) -> Any:
        spec = build_spec(from_signature(fn), on_not_run=self._on_not_run, options=self._options)
        get_guard = self._guard
        if spec.is_async:

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await get_guard()._call_async(spec, args, kwargs)

            wrapper: Any = async_wrapper
        else:

            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                return get_guard()._call_sync(spec, args, kwargs)

            wrapper = sync_wrapper
        # No __signature__ of our own: inspect.signature() follows __wrapped__ to
        # fn, so eval_str=True (MCP) resolves string annotations in fn's module.
        wrapper.__approval_guard__ = spec
        # Which Guard the tool calls through (looked up at call time: the default one may change).
        wrapper.__approval_guard_of__ = get_guard
        return wrapper
