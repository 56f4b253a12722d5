"""The vocabulary between the call rules and a driver: operations, plans, outcomes, timings.

The rules never do I/O themselves: they *yield* operations (:class:`Exchange`,
:class:`Blocking`, :class:`Sleep`, :class:`Invoke`, :class:`Checkpoint`) and a
driver performs them. A call is given a :class:`CallPlan` (fixed before the first byte is
sent) and :class:`Timings` (how long each kind of exchange may take), and
ends in a :class:`~approval_guard.NotRun` or a :class:`Ran`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any, Generic, Protocol, TypeVar, Union

import attrs

from approval_guard._call.outcome import NotRun
from approval_guard._codec.clock import ClockSample
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard._transport.answer import Answer
from approval_guard._transport.exchange import ExchangeSpec

T = TypeVar("T")


def _seconds(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"Timings.{attribute.name} must be seconds >= 0, got {value!r}")


class Abandoned(Exception):
    """Thrown into the call by a driver when the harness abandons it."""


@attrs.frozen
class Blocking(Generic[T]):
    """Run ``fn``: short local blocking work (the execution record), never abandoned midway."""

    fn: Callable[[], T]


class Tracker(Protocol):
    """Told when an exchange starts and when it ends, whether or not anyone still waits."""

    def begin(self) -> None:
        """Called by the driver before the exchange is sent."""

    def end(self, answer: Answer | None) -> None:
        """Called once it is over: its answer, or None when it failed. Never raises."""


@attrs.frozen(slots=False)  # dict-backed, as CallPlan is: one per exchange
class Exchange:
    """Perform ``spec`` with the provider and send back its :class:`~._answer.Answer`.

    The driver stops waiting at ``spec.timeout`` seconds and throws
    ``TransportError("timeout")`` instead; any failure to get an answer is
    thrown as a ``TransportError``. ``abandonable``: the harness may give up
    while it runs. ``tracker``: the exchange may outlive the driver's wait
    (it is left to finish, not stopped) and ``tracker`` hears how it ended.
    """

    spec: ExchangeSpec
    abandonable: bool = False
    tracker: Tracker | None = None


@attrs.frozen
class Sleep:
    """Wait ``seconds``; ``abandonable``: the harness may give up meanwhile."""

    seconds: float
    abandonable: bool = True


@attrs.frozen
class Invoke:
    """Start the tool now. The driver sends back its value or throws its exception.

    ``edits``: parameter name -> the value a reviewer set, converted for the tool;
    the tool is called with these in place of the caller's.
    """

    edits: Mapping[str, Any] | None = None


@attrs.frozen
class Checkpoint:
    """No I/O: a point where a driver may deliver an interruption it had to hold back."""


Op = Union[Blocking[Any], Exchange, Sleep, Invoke, Checkpoint]  # noqa: UP007 (a runtime alias on 3.10)


@attrs.frozen
class Ran:
    """The tool ran and returned ``value``."""

    value: Any


# Not slotted: attrs writes a frozen instance's fields into its __dict__ directly,
# about twice as fast as through object.__setattr__ per slot, and one is made per call.
@attrs.frozen(slots=False)
class CallPlan:
    """Everything one guarded call needs to know, fixed before the first byte is sent."""

    tool: str
    arguments: dict[str, Any]  # as sent (JSON types)
    body: bytes  # the exact bytes of every create attempt
    idempotency_key: str
    timeout: float  # the approval window requested, whole seconds
    started: float  # monotonic
    local_end: float  # monotonic: harness limit less return_margin
    harness_end: float  # monotonic: the harness limit itself
    deadline_margin: float
    poll_wait: float
    worker: str
    #: The call's arguments as JSON again, made from the objects the tool will be given
    #: (None: not checked). They must still be what was sent: the caller's objects may
    #: have changed while the call waited.
    current_arguments: Callable[[], Any] | None = None
    #: Names sent as editable (API 1.1), and how each edited JSON value becomes the tool's.
    editable: tuple[str, ...] = ()
    converters: Mapping[str, Callable[[Any], Any]] = attrs.field(factory=dict)
    #: The tool's own check of an edited call: given the converted edits, the values
    #: the tool gets (raising refuses the edit). None: the converters are the check.
    check_edit: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None
    #: Some value was sent as a redaction marker.
    redacted: bool = False
    #: The tool's own next-step sentences (``messages=``), by reason.
    messages: Mapping[Any, str] = attrs.field(factory=dict)
    #: The person the call is made for (API 1.1 ``requested_by``), as sent.
    requested_by: str | None = None
    #: ``arguments`` as canonical JSON, as they are in ``body`` (None: not kept).
    arguments_json: bytes | None = None
    #: The batch (one turn's calls) sent (API 1.3 ``batch``), if any.
    batch: str | None = None
    #: The stated reason sent (API 1.3 ``context``), as sent (cut to fit), if any.
    context: str | None = None
    #: ``body`` carries API 1.3's ``redacted``: a provider that refuses it with 400,
    #: as an older one refuses a field it does not know, gets the body without it
    #: (``_call/plan.py``'s ``without_redacted``, made only then).
    sends_redacted: bool = False


@attrs.frozen
class Timings:
    """How long each exchange of a call may take, in seconds; the defaults suit production.

    Tests shrink them to keep fault schedules fast::

        Guard(base_url=..., credential=..., timings=Timings(read_slack=0.5))

    Attributes:
        abandon_check_interval: How often a waiting thread looks at the harness's abandon event.
        read_slack: A long poll's read timeout outlasts its wait by this much.
        zero_wait_pause: The pause between ``wait=0`` polls in the last second of a wait.
        create_timeout: A create's read timeout (the provider answers a create at once).
        cancel_timeout: The best-effort cancel's whole budget: every attempt and pause ends inside
            it.
        cancel_retry_window: A failed cancel is tried again only if the pause before it ends within
            this long of the first attempt.
        cancel_reserve: Kept back from the harness limit when cancelling, to return the outcome.
        early_poll: A long poll answered "pending" sooner than this was not held: the next poll
            waits.
        short_round_trip: A clock sample from a round trip longer than this is re-read when the
            approval's expiry is in doubt.
        expiry_doubt: In doubt: seconds left, by the loose sample, under the safety margin plus
            this.
        reread_timeout: The clock re-read's whole budget.
    """

    #: How often a waiting thread looks at the harness's abandon event.
    abandon_check_interval: float = attrs.field(default=0.2, validator=_seconds)
    #: A long poll's read timeout outlasts its wait by this much.
    read_slack: float = attrs.field(default=5.0, validator=_seconds)
    #: The pause between wait=0 polls in the last second of a wait.
    zero_wait_pause: float = attrs.field(default=0.25, validator=_seconds)
    #: A create's read timeout (the provider answers a create at once).
    create_timeout: float = attrs.field(default=10.0, validator=_seconds)
    #: The best-effort cancel's whole budget: every attempt and pause ends inside it.
    cancel_timeout: float = attrs.field(default=2.0, validator=_seconds)
    #: A failed cancel is tried again only if the pause before it ends within this
    #: long of the first attempt, so the last attempt keeps time to be answered.
    cancel_retry_window: float = attrs.field(default=1.0, validator=_seconds)
    #: Kept back from the harness limit when cancelling, to return the outcome.
    cancel_reserve: float = attrs.field(default=0.1, validator=_seconds)
    #: A long poll answered "pending" sooner than this was not held: the next poll waits.
    early_poll: float = attrs.field(default=1.0, validator=_seconds)
    #: A clock sample from a round trip longer than this is re-read (wait=0) when the
    #: approval's expiry is in doubt.
    short_round_trip: float = attrs.field(default=1.0, validator=_seconds)
    #: "In doubt": seconds left, by the loose sample, under EXPIRY_SAFETY plus this.
    expiry_doubt: float = attrs.field(default=0.5, validator=_seconds)
    #: The clock re-read's whole budget.
    reread_timeout: float = attrs.field(default=2.0, validator=_seconds)


Outcome = Union[NotRun, Ran]  # noqa: UP007
CallGen = Generator[Op, Any, Outcome]


Obtained = Union[NotRun, tuple[ApprovalRequest, ClockSample]]  # noqa: UP007
