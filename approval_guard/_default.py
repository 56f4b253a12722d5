"""The default Guard: module-level ``requires_approval``, configured from the environment."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from approval_guard._call.outcome import NotRun
from approval_guard._decorator import Decorator
from approval_guard._env import ENV_REQUESTED_BY, default_guard_settings
from approval_guard._guard import Guard
from approval_guard._options.options import ApprovalOptions
from approval_guard._options.spec import check_requested_by

if TYPE_CHECKING:
    from typing_extensions import Unpack

P = ParamSpec("P")
R = TypeVar("R")
N = TypeVar("N")


_DEFAULT_GUARDS: dict[tuple[str, str, str, str, str], Guard] = {}
_DEFAULT_LOCK = threading.Lock()


def default_guard() -> Guard:
    """The Guard of module-level ``requires_approval``, built from the environment.

    Read at call time (never at import): ``APPROVAL_GUARD_URL``,
    ``APPROVAL_GUARD_CREDENTIAL`` and ``APPROVAL_GUARD_HARNESS_LIMIT`` (default
    ``35m``), and ``APPROVAL_GUARD_REDACTION_KEY`` (optional: the same key in
    every process makes the same redaction markers, so a replay from a new
    process is the same request), and ``APPROVAL_GUARD_REQUESTED_BY`` (optional:
    the person every call is made for, as ``Guard(requested_by=...)``). The same
    values give the same Guard.
    """
    settings = default_guard_settings()
    if settings.requested_by:
        check_requested_by(settings.requested_by, ENV_REQUESTED_BY)  # named as the user set it
    key = (
        settings.base_url,
        settings.credential,
        settings.harness_limit,
        settings.redaction_key,
        settings.requested_by,
    )
    with _DEFAULT_LOCK:
        guard = _DEFAULT_GUARDS.get(key)
        if guard is None:
            guard = Guard(
                base_url=settings.base_url,
                credential=settings.credential,
                harness_limit=settings.harness_limit,
                redaction_key=settings.redaction_key or None,
                requested_by=settings.requested_by or None,
            )
            _DEFAULT_GUARDS[key] = guard
        return guard


@overload
def requires_approval(
    fn: Callable[P, Coroutine[Any, Any, R]], /
) -> Callable[P, Coroutine[Any, Any, R | NotRun]]: ...


@overload
def requires_approval(fn: Callable[P, R], /) -> Callable[P, R | NotRun]: ...


@overload
def requires_approval(
    fn: None = None, /, *, on_not_run: None = None, **options: Unpack[ApprovalOptions]
) -> Decorator[NotRun]: ...


@overload
def requires_approval(
    fn: None = None, /, *, on_not_run: Callable[[NotRun], N], **options: Unpack[ApprovalOptions]
) -> Decorator[N]: ...


def requires_approval(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    on_not_run: Callable[[NotRun], Any] | None = None,
    **options: Unpack[ApprovalOptions],
) -> Any:
    """Guard a tool with the default Guard, configured from the environment at call time.

    ::

        @ag.requires_approval(timeout="30m")
        def delete_user(user_id: str) -> None: ...

    Options are checked now; the environment (``APPROVAL_GUARD_URL``,
    ``APPROVAL_GUARD_CREDENTIAL``, ``APPROVAL_GUARD_HARNESS_LIMIT``) is read when
    the tool is called. See :meth:`Guard.requires_approval`.

    Args:
        fn: The tool to guard; omitted, the call returns the decorator
            (``@requires_approval(...)``).
        on_not_run: Made from a :class:`~approval_guard.NotRun` and returned in its place (``str``
            for the plain sentence, or a framework's own result type); None returns the NotRun
            itself.
        **options: The tool's options (``ApprovalOptions``): ``timeout`` (the approval window,
            default ``"30m"``, clamped to fit the harness's limit), ``tool`` (the name the reviewer
            sees), ``exclude`` (parameters never sent), ``when`` (ask only when it returns True),
            ``redact`` (names, dotted paths or a callable: shown only as a keyed digest),
            ``editable`` (parameters a reviewer may change), ``on_event`` and ``messages`` (next-
            step sentences for a model, by reason). A bad one raises ``ConfigurationError`` now.
    """
    decorator: Decorator[Any] = Decorator(default_guard, on_not_run=on_not_run, options=options)
    return decorator if fn is None else decorator(fn)
