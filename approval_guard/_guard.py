"""``Guard``, ``requires_approval`` and ``harness_call``: glue between a tool and the rules.

The rules themselves live in ``_wait.py``; this module validates options,
binds a call's arguments, builds the call's plan, and picks the sync or async
driver.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import ipaddress
import os
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Collection, Coroutine, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Generic, ParamSpec, TypeVar, overload

import attrs

from ._client import ProviderClient, RetryPolicy, check_base_url
from ._clock import Clock, SystemClock
from ._drive import drive_async, drive_sync
from ._duration import DurationLike, format_duration, to_seconds
from ._inject import injected_parameters
from ._ledger import Ledger, ProviderLedger, default_worker, process_ledger
from ._ops import CallPlan, Ran, Timings
from ._outcome import NotRun
from ._serialize import Binder, binder, dumps, to_json_value
from ._wait import describe_clamp, guarded_call
from ._wait import requested_timeout as _requested_timeout
from .exceptions import ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")
#: What a guarded call returns instead of a NotRun (NotRun itself unless on_not_run is given).
N = TypeVar("N")

#: The longest approval window the provider API allows.
MAX_TIMEOUT = 24 * 3600

ENV_URL = "APPROVAL_GUARD_URL"
ENV_CREDENTIAL = "APPROVAL_GUARD_CREDENTIAL"
ENV_HARNESS_LIMIT = "APPROVAL_GUARD_HARNESS_LIMIT"


def _seconds(value: DurationLike, name: str) -> float:
    try:
        return to_seconds(value, name=name)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def _check_key(key: str) -> str:
    if (
        not isinstance(key, str)
        or not 1 <= len(key) <= 255
        or not all(32 < ord(ch) < 127 for ch in key)
    ):
        raise ConfigurationError(
            "idempotency_key must be 1 to 255 printable ASCII characters without spaces"
        )
    return key


@attrs.frozen
class HarnessCall:
    """Per-call facts that the harness knows (see :func:`harness_call`)."""

    idempotency_key: str | None = None
    limit: float | None = None
    abandon: threading.Event | None = None


_NO_HARNESS = HarnessCall()

_HARNESS: contextvars.ContextVar[HarnessCall | None] = contextvars.ContextVar(
    "approval_guard_harness_call", default=None
)


@contextmanager
def harness_call(
    *,
    idempotency_key: str | None = None,
    limit: DurationLike | None = None,
    abandon: threading.Event | None = None,
) -> Iterator[HarnessCall]:
    """Tell guarded calls made inside the block what the harness knows about this tool call.

    - ``idempotency_key``: the harness's own id for the tool call. A harness that
      retries the call (after a crash, on another worker) passes the same key, so
      the same approval request is recovered instead of a second one created; the
      execution record then makes sure it runs at most once.
    - ``limit``: how long the harness lets this call wait (overrides
      ``Guard(harness_limit=...)``).
    - ``abandon``: an event the harness sets when it gives up on the call; the
      pending request is then cancelled and the call returns ``NotRun(CANCELLED)``.

    It is a context variable, so it follows threads' and asyncio tasks' own
    contexts. Inside the tool itself it is cleared, so a guarded tool that calls
    another guarded tool does not reuse the key::

        with ag.harness_call(idempotency_key="toolcall_abc", limit="10m"):
            out = issue_refund("payment_123", 4900)
    """
    if idempotency_key is not None:
        _check_key(idempotency_key)
    seconds = None if limit is None else _seconds(limit, "limit")
    if abandon is not None and not callable(getattr(abandon, "is_set", None)):
        raise ConfigurationError("abandon must be a threading.Event (or have is_set() and wait())")
    facts = HarnessCall(idempotency_key=idempotency_key, limit=seconds, abandon=abandon)
    token = _HARNESS.set(facts)
    try:
        yield facts
    finally:
        _HARNESS.reset(token)


@attrs.frozen
class _ToolSpec:
    fn: Callable[..., Any]
    name: str
    timeout: float
    exclude: frozenset[str]
    signature: inspect.Signature
    is_async: bool
    bind: Binder
    on_not_run: Callable[[NotRun], Any] | None = None

    def result(self, outcome: Ran | NotRun) -> Any:
        if isinstance(outcome, Ran):
            return outcome.value
        return outcome if self.on_not_run is None else self.on_not_run(outcome)


def _make_spec(
    fn: Callable[..., Any],
    *,
    timeout: DurationLike,
    tool: str | None,
    exclude: Collection[str],
    on_not_run: Callable[[NotRun], Any] | None = None,
) -> _ToolSpec:
    if not callable(fn):
        raise TypeError(f"requires_approval decorates a function, not {type(fn).__name__}")
    if on_not_run is not None and not callable(on_not_run):
        raise ConfigurationError("on_not_run must be a callable taking a NotRun, such as str")
    seconds = _seconds(timeout, "timeout")
    if seconds != int(seconds) or not 1 <= seconds <= MAX_TIMEOUT:
        raise ConfigurationError(
            f"timeout must be whole seconds between 1s and 24h, got {timeout!r}"
        )
    name = tool if tool is not None else getattr(fn, "__name__", None)
    if not isinstance(name, str) or not 1 <= len(name) <= 200:
        raise ConfigurationError("tool must be a name of 1 to 200 characters")
    if isinstance(exclude, str):
        raise ConfigurationError("exclude must be a collection of parameter names, not a string")
    signature = inspect.signature(fn)
    unknown = set(exclude) - set(signature.parameters)
    if unknown:
        raise ConfigurationError(
            f"exclude names parameters that {name} does not have: {sorted(unknown)}"
        )
    # Parameters a framework fills in (a run context, a config) are never the
    # model's arguments: recognised by type, they are left out like `exclude`.
    left_out = frozenset(exclude) | injected_parameters(fn, signature)
    return _ToolSpec(
        fn=fn,
        name=name,
        timeout=seconds,
        exclude=left_out,
        signature=signature,
        is_async=inspect.iscoroutinefunction(fn),
        bind=binder(signature, exclude=left_out),
        on_not_run=on_not_run,
    )


def _provider_scope(base_url: str) -> str:
    """The provider's identity in the execution record: scheme, host and port, then the path."""
    parts = urllib.parse.urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    # One host, one spelling: no trailing dot (an absolute DNS name), an address in its
    # canonical form (``[0:0:0:0:0:0:0:1]`` is ``[::1]``), so one provider is one scope.
    host = (parts.hostname or "").lower().rstrip(".")
    with suppress(ValueError):
        host = ipaddress.ip_address(host).compressed
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}:{port}{parts.path.rstrip('/')}"


class Guard:
    """Configuration for guarded tools, and the connection to one approval provider.

    ::

        guard = ag.Guard(
            base_url="https://approvals.example.com",
            credential=os.environ["APPROVAL_GUARD_CREDENTIAL"],
            harness_limit="35m",
        )

        @guard.requires_approval(timeout="30m")
        def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict: ...

    Every option is checked here; a bad one raises ``ValueError``
    (:class:`~approval_guard.exceptions.ConfigurationError`). One Guard may be
    used from many threads and event loops at once.
    """

    def __init__(
        self,
        *,
        base_url: str,
        credential: str,
        harness_limit: DurationLike = "35m",
        poll_wait: DurationLike = "30s",
        return_margin: DurationLike = "5s",
        deadline_margin: DurationLike = "5s",
        ledger: Ledger | None = None,
        allow_insecure_http: bool = False,
        clock: Clock | None = None,
        timings: Timings | None = None,
    ) -> None:
        try:
            self._base_url = check_base_url(base_url, allow_insecure_http=allow_insecure_http)
            if any(ch.isspace() for ch in self._base_url):
                raise ValueError(f"base_url must not contain whitespace, got {base_url!r}")
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        if (
            not isinstance(credential, str)
            or not credential
            or not all(32 < ord(ch) < 127 for ch in credential)
        ):
            # Never echo the value: it is a secret.
            raise ConfigurationError(
                "credential must be a non-empty token of printable ASCII without spaces"
            )
        self._harness_limit = _seconds(harness_limit, "harness_limit")
        self._poll_wait = _seconds(poll_wait, "poll_wait")
        self._return_margin = _seconds(return_margin, "return_margin")
        self._deadline_margin = _seconds(deadline_margin, "deadline_margin")
        if self._harness_limit - self._return_margin - self._deadline_margin < 1:
            raise ConfigurationError(
                "harness_limit must exceed return_margin + deadline_margin by at least 1s"
            )
        if ledger is None:
            ledger = process_ledger()
        elif not isinstance(ledger, Ledger):
            raise ConfigurationError(
                f"ledger must keep the Ledger protocol (claim, finish, fail, ...), "
                f"not {type(ledger).__name__}"
            )
        # Rows are keyed by provider as well as request id: two providers may use one id.
        self._ledger = ProviderLedger(ledger, _provider_scope(self._base_url))
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._client = ProviderClient(self._base_url, credential, clock=self._clock)
        self._policy = RetryPolicy()
        self._timings = timings
        self._worker = default_worker()

    def __repr__(self) -> str:
        return (
            f"Guard(base_url={self._base_url!r}, credential='***', "
            f"harness_limit={format_duration(self._harness_limit)!r}, "
            f"poll_wait={format_duration(self._poll_wait)!r}, ledger={self._ledger!r})"
        )

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def ledger(self) -> Ledger:
        """This Guard's view of its execution record, by this provider's request ids."""
        return self._ledger

    def close(self) -> None:
        """Close pooled HTTP connections."""
        self._client.close()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @overload
    def requires_approval(
        self,
        fn: Callable[P, Coroutine[Any, Any, R]],
        /,
    ) -> Callable[P, Coroutine[Any, Any, R | NotRun]]: ...

    @overload
    def requires_approval(self, fn: Callable[P, R], /) -> Callable[P, R | NotRun]: ...

    @overload
    def requires_approval(
        self,
        fn: None = None,
        /,
        *,
        timeout: DurationLike = "30m",
        tool: str | None = None,
        exclude: Collection[str] = (),
        on_not_run: None = None,
    ) -> _Decorator[NotRun]: ...

    @overload
    def requires_approval(
        self,
        fn: None = None,
        /,
        *,
        timeout: DurationLike = "30m",
        tool: str | None = None,
        exclude: Collection[str] = (),
        on_not_run: Callable[[NotRun], N],
    ) -> _Decorator[N]: ...

    def requires_approval(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        timeout: DurationLike = "30m",
        tool: str | None = None,
        exclude: Collection[str] = (),
        on_not_run: Callable[[NotRun], Any] | None = None,
    ) -> Any:
        """Guard a tool: each call waits for a person's approval, then runs or returns NotRun.

        - ``timeout``: the approval window to ask for (clamped to fit the harness's limit).
        - ``tool``: the name the reviewer sees (default: the function's name).
        - ``exclude``: parameters not sent for approval (framework-injected context).
        - ``on_not_run``: what to return instead of a ``NotRun``, made from it: ``str``
          for the plain sentence, or a framework's own result type (see the README).
        """
        decorator: _Decorator[Any] = _Decorator(
            lambda: self, timeout=timeout, tool=tool, exclude=exclude, on_not_run=on_not_run
        )
        return decorator if fn is None else decorator(fn)

    # -- one call ------------------------------------------------------------

    def _plan(self, spec: _ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[
        CallPlan, threading.Event | None
    ]:
        # to_json_value builds fresh plain-JSON containers, so no JSON round trip is needed.
        arguments = to_json_value(spec.bind(args, kwargs))
        facts = _HARNESS.get() or _NO_HARNESS
        limit = facts.limit if facts.limit is not None else self._harness_limit
        timeout = _requested_timeout(
            spec.timeout, limit, self._return_margin + self._deadline_margin
        )
        if 1 <= timeout < spec.timeout:
            describe_clamp(spec.name, spec.timeout, timeout)
        # The body depends only on the call and the configuration, never on time
        # already spent: a harness that replays the key after a crash must send
        # the same bytes, or the provider rejects it as a different request.
        body = dumps(
            {"tool": spec.name, "arguments": arguments, "timeout": format_duration(timeout)}
        )
        started = self._clock.monotonic()
        plan = CallPlan(
            tool=spec.name,
            arguments=arguments,
            body=body,
            idempotency_key=facts.idempotency_key or str(uuid.uuid4()),
            timeout=timeout,
            started=started,
            local_end=started + limit - self._return_margin,
            harness_end=started + limit,
            deadline_margin=self._deadline_margin,
            poll_wait=self._poll_wait,
            worker=self._worker,
            current_arguments=lambda: to_json_value(spec.bind(args, kwargs)),
        )
        return plan, facts.abandon

    def _call_sync(self, spec: _ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        plan, abandon = self._plan(spec, args, kwargs)
        gen = guarded_call(
            plan,
            self._client,
            self._ledger,
            self._clock,
            self._policy,
            abandon,
            timings=self._timings,
        )

        def invoke() -> Any:
            token = _HARNESS.set(None)
            try:
                return spec.fn(*args, **kwargs)
            finally:
                _HARNESS.reset(token)

        outcome = drive_sync(gen, invoke, self._clock, abandon, timings=self._timings)
        return spec.result(outcome)

    async def _call_async(
        self, spec: _ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        plan, abandon = self._plan(spec, args, kwargs)
        gen = guarded_call(
            plan,
            self._client,
            self._ledger,
            self._clock,
            self._policy,
            abandon,
            timings=self._timings,
        )

        async def invoke() -> Any:
            token = _HARNESS.set(None)
            try:
                return await spec.fn(*args, **kwargs)
            finally:
                _HARNESS.reset(token)

        outcome = await drive_async(gen, invoke, self._clock, abandon, timings=self._timings)
        return spec.result(outcome)


class _Decorator(Generic[N]):
    """What ``requires_approval(...)`` returns: validated options waiting for a function.

    ``N`` is what a call that did not run returns: ``NotRun``, or what
    ``on_not_run`` makes of it.
    """

    def __init__(
        self,
        guard: Callable[[], Guard],
        *,
        timeout: DurationLike,
        tool: str | None,
        exclude: Collection[str],
        on_not_run: Callable[[NotRun], N] | None = None,
    ) -> None:
        self._guard = guard
        self._timeout = timeout
        self._tool = tool
        self._exclude = exclude
        self._on_not_run = on_not_run
        # Validate the options now, with a stand-in, so a bad one raises at decoration.
        _make_spec(
            _probe,
            timeout=timeout,
            tool="probe" if tool is None else tool,
            exclude=(),
            on_not_run=on_not_run,
        )

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, R]]
    ) -> Callable[P, Coroutine[Any, Any, R | N]]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R | N]: ...

    def __call__(self, fn: Callable[..., Any]) -> Any:
        spec = _make_spec(
            fn,
            timeout=self._timeout,
            tool=self._tool,
            exclude=self._exclude,
            on_not_run=self._on_not_run,
        )
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
        return wrapper


def _probe() -> None:
    """Stand-in used to validate decorator options before a function is given."""


_DEFAULT_GUARDS: dict[tuple[str, str, str], Guard] = {}
_DEFAULT_LOCK = threading.Lock()


def default_guard() -> Guard:
    """The Guard of module-level ``requires_approval``, built from the environment.

    Read at call time (never at import): ``APPROVAL_GUARD_URL``,
    ``APPROVAL_GUARD_CREDENTIAL`` and ``APPROVAL_GUARD_HARNESS_LIMIT`` (default
    ``35m``). The same values give the same Guard (and its connections).
    """
    url = os.environ.get(ENV_URL, "")
    credential = os.environ.get(ENV_CREDENTIAL, "")
    limit = os.environ.get(ENV_HARNESS_LIMIT, "") or "35m"
    if not url or not credential:
        raise ConfigurationError(
            f"module-level requires_approval needs {ENV_URL} and {ENV_CREDENTIAL} in the "
            "environment (or use a Guard object)"
        )
    key = (url, credential, limit)
    with _DEFAULT_LOCK:
        guard = _DEFAULT_GUARDS.get(key)
        if guard is None:
            guard = Guard(base_url=url, credential=credential, harness_limit=limit)
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
    fn: None = None,
    /,
    *,
    timeout: DurationLike = "30m",
    tool: str | None = None,
    exclude: Collection[str] = (),
    on_not_run: None = None,
) -> _Decorator[NotRun]: ...


@overload
def requires_approval(
    fn: None = None,
    /,
    *,
    timeout: DurationLike = "30m",
    tool: str | None = None,
    exclude: Collection[str] = (),
    on_not_run: Callable[[NotRun], N],
) -> _Decorator[N]: ...


def requires_approval(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    timeout: DurationLike = "30m",
    tool: str | None = None,
    exclude: Collection[str] = (),
    on_not_run: Callable[[NotRun], Any] | None = None,
) -> Any:
    """Guard a tool with the default Guard, configured from the environment at call time.

    ::

        @ag.requires_approval(timeout="30m")
        def delete_user(user_id: str) -> None: ...

    Options are checked now; the environment (``APPROVAL_GUARD_URL``,
    ``APPROVAL_GUARD_CREDENTIAL``, ``APPROVAL_GUARD_HARNESS_LIMIT``) is read when
    the tool is called. See :meth:`Guard.requires_approval`.
    """
    decorator: _Decorator[Any] = _Decorator(
        default_guard, timeout=timeout, tool=tool, exclude=exclude, on_not_run=on_not_run
    )
    return decorator if fn is None else decorator(fn)
