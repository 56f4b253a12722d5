"""``Guard``: one provider's configuration, gluing a tool's calls to the rules.

The rules live in ``_call/rules.py`` and the modules it names; options and each
call's plan in ``_call/plan.py``; the harness's facts in ``_harness.py``; the
decorator in ``_decorator.py``; the environment's default Guard in
``_default.py``. This module puts them together and picks the sync or async driver.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from approval_guard import _harness
from approval_guard._call.backoff import RetryPolicy
from approval_guard._call.edit import edited
from approval_guard._call.events import Emitter, check_on_event
from approval_guard._call.ops import CallGen, CallPlan, Invoke, Timings
from approval_guard._call.outcome import NotRun
from approval_guard._call.plan import CallSettings, plan_call
from approval_guard._call.report import Report
from approval_guard._call.rules import guarded_call
from approval_guard._codec.clock import Clock, SystemClock
from approval_guard._codec.duration import DurationLike, format_duration
from approval_guard._decorator import Decorator
from approval_guard._ledger.memory import process_ledger
from approval_guard._ledger.protocol import Ledger, claim_accepts_digest, default_worker
from approval_guard._ledger.scoped import ProviderLedger, provider_scope
from approval_guard._options.describe import described, described_async
from approval_guard._options.options import ApprovalOptions
from approval_guard._options.redact import as_reviewed, check_key, new_key
from approval_guard._options.spec import ToolSpec, check_requested_by, check_token
from approval_guard._options.spec import seconds_option as _seconds
from approval_guard._options.when import asks, asks_async
from approval_guard._otel import call_span, may_trace
from approval_guard._transport.async_drive import drive_async, threaded
from approval_guard._transport.drive import APerform
from approval_guard._transport.sync_client import ProviderClient, check_base_url
from approval_guard._transport.sync_drive import drive_sync, late_sync
from approval_guard.exceptions import ConfigurationError

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Guard"]

log = logging.getLogger("approval_guard")

P = ParamSpec("P")
R = TypeVar("R")
#: What a guarded call returns instead of a NotRun (NotRun itself unless on_not_run is given).
N = TypeVar("N")


class Guard:
    """Configuration for guarded tools, and the connection to one approval provider.

    ::

        guard = ag.Guard(base_url="https://approvals.example", credential=..., harness_limit="1h")

        @guard.requires_approval(timeout="30m")
        def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict: ...

    Every option is checked here; a bad one raises ``ValueError``
    (:class:`~approval_guard.exceptions.ConfigurationError`). One Guard may be
    used from many threads and event loops at once.

    Args:
        base_url: The provider (``https://``; ``http://`` only to loopback or when allowed).
        credential: The instance credential (never logged, never in a repr).
        harness_limit: How long the harness lets a call wait (``"35m"``); per call: harness_call.
        poll_wait: How long each long poll asks the provider to hold its answer.
        return_margin: How long before the harness's limit a call returns its outcome.
        deadline_margin: How much of the harness's limit is kept from the window asked for.
        ledger: The execution record (default: a MemoryLedger; SQLite or PostgreSQL to share).
        allow_insecure_http: Allow ``http://`` to a host that is not loopback (credential in clear).
        clock: The clock every deadline is measured on (a fake one in tests).
        timings: How long each exchange may take (``testing.Timings``; tests shrink them).
        on_event: Called with each event of every guarded call; raising changes no outcome.
        redaction_key: The markers' HMAC key (default: ``APPROVAL_GUARD_REDACTION_KEY``, or random).
        requested_by: The person the agent acts for (API 1.1), sent with every request.
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
        on_event: Callable[[Any], object] | None = None,
        redaction_key: str | bytes | None = None,
        requested_by: str | None = None,
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
        self._settings = CallSettings(
            harness_limit=self._harness_limit,
            poll_wait=self._poll_wait,
            return_margin=self._return_margin,
            deadline_margin=self._deadline_margin,
        )
        if ledger is None:
            ledger = process_ledger()
        elif not isinstance(ledger, Ledger):
            raise ConfigurationError(
                f"ledger must keep the Ledger protocol (claim, finish, fail, ...), "
                f"not {type(ledger).__name__}"
            )
        elif not claim_accepts_digest(ledger):
            raise ConfigurationError(
                f"the ledger's claim() must be a plain function taking (request_id, *, tool, "
                f"worker, arguments_digest) (the Ledger protocol), and "
                f"{type(ledger).__name__}.claim is not"
            )
        # Rows are keyed by provider as well as request id: two providers may use one id.
        self._ledger = ProviderLedger(ledger, provider_scope(self._base_url))
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._client = ProviderClient(self._base_url, credential, clock=self._clock)
        self._credential = credential
        # Async tools' transport, made on the first async call (it imports httpx).
        self._aclient: Any = None
        self._aperform: APerform | None = None
        self._async_lock = threading.Lock()
        self._policy = RetryPolicy()
        self._timings = timings
        self._late_sync = late_sync(self._client.perform, self._clock, timings, self._client.here)
        self._worker = default_worker()
        self._on_event = check_on_event(on_event)
        # HMAC key of redaction markers (secret): random unless given, stable for this Guard.
        self._redaction_key = new_key() if redaction_key is None else check_key(redaction_key)
        self._requested_by = None if requested_by is None else check_requested_by(requested_by)
        self._check()

    def _check(self) -> None:
        """A subclass's own checks of the options, once they are set (raise ConfigurationError)."""

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
    def requested_by(self) -> str | None:
        """The person every call is made for by default (``Guard(requested_by=...)``)."""
        return self._requested_by

    @property
    def ledger(self) -> Ledger:
        """This Guard's view of its execution record, by this provider's request ids."""
        return self._ledger

    def close(self) -> None:
        """Close pooled HTTP connections (a coroutine should ``await guard.aclose()``)."""
        self._client.close()
        if self._aclient is not None:
            self._aclient.close()

    async def aclose(self) -> None:
        """Close pooled HTTP connections, waiting for this event loop's to close."""
        self._client.close()
        if self._aclient is not None:
            await self._aclient.aclose()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Guard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _async_transport(self) -> APerform:
        """How async tools perform exchanges: httpx on the loop, or threads without it."""
        perform = self._aperform
        if perform is not None:
            return perform
        with self._async_lock:
            if self._aperform is None:
                try:
                    from approval_guard._transport.async_client import AsyncProviderClient
                except ImportError:
                    log.warning(
                        "httpx is not installed, so async tools wait in helper threads "
                        "(one per exchange in flight); pip install 'approval-guard[async]'"
                    )
                    self._aperform = threaded(self._client.perform)
                else:
                    self._aclient = AsyncProviderClient(
                        self._base_url, self._credential, clock=self._clock
                    )
                    self._aperform = self._aclient.perform
            return self._aperform

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
        self, fn: None = None, /, *, on_not_run: None = None, **options: Unpack[ApprovalOptions]
    ) -> Decorator[NotRun]: ...

    @overload
    def requires_approval(
        self,
        fn: None = None,
        /,
        *,
        on_not_run: Callable[[NotRun], N],
        **options: Unpack[ApprovalOptions],
    ) -> Decorator[N]: ...

    def requires_approval(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        on_not_run: Callable[[NotRun], Any] | None = None,
        **options: Unpack[ApprovalOptions],
    ) -> Any:
        """Guard a tool: each call waits for a person's approval, then runs or returns NotRun.

        Args:
            fn: The tool to guard; omitted, the call returns the decorator.
            on_not_run: Made from a NotRun and returned in its place (see docs/frameworks.md).
            **options: As :func:`approval_guard.requires_approval`'s, checked now.
        """
        decorator: Decorator[Any] = Decorator(lambda: self, on_not_run=on_not_run, options=options)
        return decorator if fn is None else decorator(fn)

    # -- one call ------------------------------------------------------------

    def _plan(
        self,
        spec: ToolSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        bound: dict[str, Any],
        started: float | None = None,
    ) -> tuple[CallPlan | NotRun, threading.Event | None]:
        """This call's plan (or why nothing will be sent), and the harness's abandon event."""
        facts = _harness.current()
        if facts.started_at is not None:
            started = _harness.first_start(facts.started_at, self._clock, started)
        plan = plan_call(
            spec,
            args,
            kwargs,
            bound=bound,
            idempotency_key=facts.idempotency_key,
            limit=facts.limit,
            settings=self._settings,
            clock=self._clock,
            worker=self._worker,
            redaction_key=self._redaction_key,
            started=started,
            requested_by=facts.requested_by or self._requested_by,
            batch=facts.batch,
            context=facts.reason,
        )
        return plan, facts.abandon

    def _rules(
        self, plan: CallPlan | NotRun, abandon: threading.Event | None, emit: Emitter
    ) -> CallGen | NotRun:
        """This call's rules, ready for a driver (or why nothing will be sent)."""
        if isinstance(plan, NotRun):
            return plan
        return guarded_call(
            plan,
            self._ledger,
            self._clock,
            self._policy,
            abandon,
            spawn=self._late_sync,
            timings=self._timings,
            emit=emit,
        )

    def _call_sync(self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not may_trace():
            return self._traced_sync(spec, args, kwargs, Report.of(spec, self._on_event, None))
        with call_span(spec.name, self._clock.monotonic) as span:
            return self._traced_sync(spec, args, kwargs, Report.of(spec, self._on_event, span))

    def _traced_sync(
        self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any], report: Report
    ) -> Any:
        bound = spec.bind(args, kwargs)
        # A when= may be slow: the harness's limit counts from here, not after it.
        started = None if spec.when is None else self._clock.monotonic()
        if spec.when is not None and not asks(spec, bound):
            gone = report.skipped(lambda: as_reviewed(bound, spec.redact, self._redaction_key))
            if gone is not None:
                return report.result(gone)
            try:
                with _harness.outside():
                    value = spec.fn(*args, **kwargs)
            except BaseException as exc:
                report.finished_unasked(exc)
                raise
            report.finished_unasked(None)
            return value
        plan, abandon = self._plan(spec, args, kwargs, bound, started)
        plan = described(spec, plan)
        gen = self._rules(plan, abandon, report.emit)
        if isinstance(gen, NotRun):
            return report.result(gen)

        def invoke(op: Invoke) -> Any:
            call_args, call_kwargs = edited(spec, args, kwargs, op)
            with _harness.outside():
                return spec.fn(*call_args, **call_kwargs)

        try:
            outcome = drive_sync(
                gen,
                invoke,
                self._clock,
                abandon,
                perform=self._client.perform,
                # A stand-in transport (tests, benchmarks) may have no `here`.
                here=getattr(self._client, "here", None),
                timings=self._timings,
            )
        except BaseException as exc:
            report.raised(exc)
            raise
        return report.result(outcome)

    async def _call_async(
        self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not may_trace():
            report = Report.of(spec, self._on_event, None)
            return await self._traced_async(spec, args, kwargs, report)
        with call_span(spec.name, self._clock.monotonic) as span:
            report = Report.of(spec, self._on_event, span)
            return await self._traced_async(spec, args, kwargs, report)

    async def _traced_async(
        self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any], report: Report
    ) -> Any:
        bound = spec.bind(args, kwargs)
        started = None
        if spec.when is not None:
            started = self._clock.monotonic()  # the harness's limit counts from here
            ask = await asks_async(spec, bound) if spec.when_async else asks(spec, bound)
            if not ask:
                gone = report.skipped(lambda: as_reviewed(bound, spec.redact, self._redaction_key))
                if gone is not None:
                    return report.result(gone)
                try:
                    with _harness.outside():
                        value = await spec.fn(*args, **kwargs)
                except BaseException as exc:
                    report.finished_unasked(exc)
                    raise
                report.finished_unasked(None)
                return value
        perform = self._async_transport()
        plan, abandon = self._plan(spec, args, kwargs, bound, started)
        if spec.describe is not None:
            plan = await described_async(spec, plan)
        gen = self._rules(plan, abandon, report.emit)
        if isinstance(gen, NotRun):
            return report.result(gen)

        async def invoke(op: Invoke) -> Any:
            call_args, call_kwargs = edited(spec, args, kwargs, op)
            with _harness.outside():
                return await spec.fn(*call_args, **call_kwargs)

        try:
            outcome = await drive_async(
                gen, invoke, self._clock, abandon, perform=perform, timings=self._timings
            )
        except BaseException as exc:
            report.raised(exc)
            raise
        return report.result(outcome)
