"""``Guard``: one provider's configuration, gluing a tool's calls to the rules.

The rules live in ``_wait.py`` and the modules it names; options and each
call's plan in ``_plan.py``; the harness's facts in ``_harness.py``; the
decorator in ``_decorator.py``; the environment's default Guard in
``_default.py``. This module puts them together and picks the sync or async driver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Coroutine
from typing import Any, ParamSpec, TypeVar, overload

from . import _harness
from ._backoff import RetryPolicy
from ._client import ProviderClient, check_base_url
from ._clock import Clock, SystemClock
from ._decorator import Decorator
from ._drive import drive_async, drive_sync
from ._duration import DurationLike, format_duration
from ._ledger import Ledger, ProviderLedger, default_worker, process_ledger
from ._ops import CallGen, CallPlan, Timings
from ._outcome import NotRun
from ._plan import CallSettings, ToolSpec, check_token, plan_call, provider_scope
from ._plan import seconds_option as _seconds
from ._wait import guarded_call
from .exceptions import ConfigurationError

__all__ = ["Guard"]

P = ParamSpec("P")
R = TypeVar("R")
#: What a guarded call returns instead of a NotRun (NotRun itself unless on_not_run is given).
N = TypeVar("N")


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
        check_token(credential, "credential")  # never echoed: it is a secret
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
        self._ledger = ProviderLedger(ledger, provider_scope(self._base_url))
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
    ) -> Decorator[NotRun]: ...

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
    ) -> Decorator[N]: ...

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
        decorator: Decorator[Any] = Decorator(
            lambda: self, timeout=timeout, tool=tool, exclude=exclude, on_not_run=on_not_run
        )
        return decorator if fn is None else decorator(fn)

    # -- one call ------------------------------------------------------------

    def _plan(
        self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[CallPlan, threading.Event | None]:
        facts = _harness.current()
        settings = CallSettings(
            harness_limit=self._harness_limit,
            poll_wait=self._poll_wait,
            return_margin=self._return_margin,
            deadline_margin=self._deadline_margin,
        )
        plan = plan_call(
            spec,
            args,
            kwargs,
            idempotency_key=facts.idempotency_key,
            limit=facts.limit,
            settings=settings,
            clock=self._clock,
            worker=self._worker,
        )
        return plan, facts.abandon

    def _rules(
        self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[CallGen, threading.Event | None]:
        """This call's rules, ready for a driver, and the harness's abandon event."""
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
        return gen, abandon

    def _call_sync(self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        gen, abandon = self._rules(spec, args, kwargs)

        def invoke() -> Any:
            with _harness.outside():
                return spec.fn(*args, **kwargs)

        outcome = drive_sync(gen, invoke, self._clock, abandon, timings=self._timings)
        return spec.result(outcome)

    async def _call_async(
        self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        gen, abandon = self._rules(spec, args, kwargs)

        async def invoke() -> Any:
            with _harness.outside():
                return await spec.fn(*args, **kwargs)

        outcome = await drive_async(gen, invoke, self._clock, abandon, timings=self._timings)
        return spec.result(outcome)
