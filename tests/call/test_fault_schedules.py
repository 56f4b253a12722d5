"""Randomized fault schedules against the local provider: no schedule breaks the call rules.

Each schedule is one logical guarded call against a real provider over real
HTTP, with a fault (or none) chosen for each of its create, poll and cancel
exchanges (lost answer after commit, reset before, 5xx, 429 with Retry-After,
garbage body, delay past the read timeout, a hostile ``Retry-After`` such as
``²`` or a date at the end of the calendar, a ``Date`` that is unreadable, out
of range, two-digit, or an hour stale or ahead), a reviewer's action (approve,
approve already expired, deny, cancel at the provider, nothing) at a random
moment, a provider clock up to ten minutes off, a small harness limit, and
sometimes an abandonment; a batch is drawn with or without ``HTTP_PROXY`` and
``ALL_PROXY`` pointing at a trap.

Each schedule also draws the tool's policy (:class:`Policy`): a ``when=``
(none; always True; always False; raises; returns a non-bool such as ``0`` or
``None``; depends on ``amount``), a ``redact=`` (none; the ``token``
parameter; the dotted path ``card.number`` into a dict argument) and an
``editable=`` (none; ``amount`` (int), ``memo`` (str), or both). An approval
may carry an edit of what the reviewer sees: a valid one of editable
parameters, one of a non-editable parameter (the provider refuses it, so the
reviewer's action fails and the call goes on as if nobody acted), or a value
of the wrong type for an editable one (the provider takes any JSON there; the
guard must refuse it). The guards share a known ``redaction_key`` so the
expected markers are computed here, independently.

About half the schedules are drawn on the approved path (a timely approval,
only faults a call can ride out, a ``when=`` that asks, no edit or a valid
one), so that at least a third end with the approval used. Whatever happens,
these hold:

- the tool runs at most once, only after an approval, and before that
  approval's ``expires_at`` by the provider's clock;
- the request holds exactly the arguments sent, redacted values as markers,
  and the editable names the tool declared;
- a tool that ran after an approval got exactly the caller's arguments (real
  values behind the markers) with the reviewer's valid edits applied and
  converted (exact types): never a non-editable change, never a wrong-typed
  value, and never after an approval whose edit held one;
- the ledger's ``arguments_digest`` for that approval is the SHA-256 of the
  canonical JSON of what ran, in the redacted form;
- when ``when=`` returned exactly False, the tool ran once with the caller's
  arguments and no create was sent; any other ``when=`` (raising or a
  non-bool included) asks: a request exists unless there was no room to ask,
  a create failed, or the call was abandoned;
- no redacted real value appears in any request the provider holds (arguments,
  decision, history) or in the ``NotRun``;
- ``DENIED`` only when the reviewer denied;
- at most one request per logical call, whatever was lost;
- the call returns within the harness limit;
- nothing ever connects to the proxy named in the environment;
- a call that gives up (limit reached, abandoned) leaves no request pending,
  unless no answer to its create ever arrived (so it never learnt the id).

Speed: ``poll_wait`` is 1 s and the limits are a few seconds, and the read
timeouts are cut down for this module (``Timings``: read slack 0.3 s instead of 5 s,
create timeout 0.5 s, cancel timeout 1.5 s,
cancel retry window 1.2 s) so that "a delay past the
read timeout" costs well under two seconds. Schedules run in batches, each
schedule of a batch on its own provider at the same time; hypothesis draws
and shrinks whole batches. Counts (outcome ``ran`` is a used approval,
``ran_without_asking`` a ``when=`` that said no) go to the terminal summary, and to
``benchmarks/results/fault_schedules.json`` when APPROVAL_GUARD_RECORD_RESULTS=1.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import math
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.exact_json import canonical_json
from approval_guard._codec.wire import APPROVED, CANCELLED, DENIED, PENDING, format_http_date
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.provider.store.models import InvalidEdit, NotPendingError
from approval_guard.testing import LocalProvider, Timings
from tests.support.paths import REPO

BATCH = 30  # schedules per hypothesis example, run at once on BATCH providers
EXAMPLES = 10  # hypothesis examples: BATCH * EXAMPLES = 300 schedules per run
READ_SLACK = 0.3
CREATE_TIMEOUT = 0.5
CANCEL_TIMEOUT = 1.5  # the cancel's whole budget
CANCEL_RETRY_WINDOW = 1.2  # room for a Retry-After of 1 s after a quick first attempt
POLL_WAIT = 1
RETURN_MARGIN = 1.75  # > CANCEL_TIMEOUT, as the defaults are (5 s > 2 s)
DEADLINE_MARGIN = 0.25
#: Scheduling slack on a loaded 2-CPU CI machine for "returns within the limit".
LIMIT_TOLERANCE = 0.5
#: How long past the read timeout an injected delay lasts, per exchange.
DELAYS = {
    "create": CREATE_TIMEOUT + 0.1,
    "poll": POLL_WAIT + READ_SLACK + 0.1,
    "cancel": CANCEL_TIMEOUT + 0.1,
}
#: The guards' redaction key, known here so the expected markers are computed independently.
REDACTION_KEY = b"fault-schedules-redaction-key-32"
RESULTS = REPO / "benchmarks" / "results" / "fault_schedules.json"

# --------------------------------------------------------------------------- schedules

#: Retry-After values no RFC 9110 parser may trust (or that must be floored).
HOSTILE_RETRY_AFTER = (
    "\u00b2",  # a Unicode digit: str.isdigit() is true, float() fails
    "0",
    "-1",
    "1.5",
    "1e9",
    "99999999999999999999999",
    "Fri, 31 Dec 9999 23:59:59 -2359",
    "Thu, 01 Jan 1970 00:00:00 GMT",
    "",
)
#: Date values that are not a clock reading to trust; "stale"/"ahead" are an hour
#: off the provider's own clock (a cache, a lagging node), made when queued.
HOSTILE_DATE = (
    "Fri, 31 Dec 9999 23:59:59 -2359",
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "Thu, 01 Jan 1970 00:00:00 GMT",
    "Mon, 01 Jan 1900 00:00:00 GMT",
    "Sun, 06 Nov 94 08:49:37 GMT",
    "Sunday, 06-Nov-94 08:49:37 GMT",
    "not a date",
    "stale",
    "ahead",
)
HOSTILE = st.one_of(
    st.tuples(
        st.just("retry_after"), st.sampled_from([429, 503]), st.sampled_from(HOSTILE_RETRY_AFTER)
    ),
    st.tuples(st.just("date"), st.sampled_from(HOSTILE_DATE)),
)

FAULT = st.one_of(
    st.just(("ok",)),
    HOSTILE,
    st.just(("drop_after_commit",)),
    st.just(("reset_before",)),
    st.tuples(st.just("5xx"), st.sampled_from([500, 502, 503, 504])),
    st.tuples(st.just("429"), st.sampled_from([0, 1])),
    st.just(("garbage",)),
    st.just(("delay",)),
)


#: The caller's arguments other than ``case`` and the secrets (fresh per schedule).
MEMO = "refund for order 1"
HOLDER = "Ada"
#: ``when=`` configurations: what the predicate does with the bound arguments.
WHEN_KINDS = ("none", "true", "false", "raises", "nonbool", "depends")
#: What a ``"nonbool"`` predicate returns: truthy or falsy, never exactly a bool.
NON_BOOLS: tuple[object, ...] = (0, 1, None, "no", [])
#: ``"depends"`` asks for this amount and up (and says exactly False below it).
ASK_FROM = 5000
REDACTS = ((), ("token",), ("card.number",))
EDITABLES = ((), ("amount",), ("memo",), ("amount", "memo"))
#: A reviewer's valid new values, each different from what the caller sent.
VALID_EDITS: dict[str, tuple[Any, ...]] = {
    "amount": (2500, 0, 123456789012),
    "memo": ("agreed by phone", "", "ünïcode ✓"),
}
#: JSON the provider accepts for an editable name but that is not the parameter's type.
WRONG_TYPED_EDITS: dict[str, tuple[Any, ...]] = {
    "amount": ("2500", 2500.0, 25.5, True, None, [2500]),
    "memo": (7, None, True, ["agreed"], {"text": "agreed"}),
}
#: A change to each parameter when it is not editable (the provider refuses it).
NON_EDITABLE_EDITS: dict[str, Any] = {
    "amount": 1,
    "memo": "changed",
    "token": "changed",
    "card": {"holder": "Mallory", "number": "0"},
}


@attrs.frozen
class Policy:
    """The tool's ``when``/``redact``/``editable`` options and the reviewer's edit."""

    when: tuple[Any, ...]  # (kind,) or ("nonbool", what it returns)
    amount: int  # the caller's amount
    redact: tuple[str, ...]
    editable: tuple[str, ...]
    edit: str  # none / valid / wrong_type / non_editable
    changes: tuple[tuple[str, Any], ...]  # name -> new JSON value, as the reviewer sets it

    @property
    def skips(self) -> bool:
        """``when`` returns exactly False: the tool runs at once, nothing is asked."""
        kind = self.when[0]
        return kind == "false" or (kind == "depends" and self.amount < ASK_FROM)

    def predicate(self) -> Any:
        kind = self.when[0]
        if kind == "none":
            return None
        if kind == "true":
            return lambda args: True
        if kind == "false":
            return lambda args: False
        if kind == "raises":
            return _unreachable_policy
        if kind == "nonbool":
            value = self.when[1]
            return lambda args: value
        return lambda args: args["amount"] >= ASK_FROM


def _unreachable_policy(args: Any) -> bool:
    raise RuntimeError("the policy service is unreachable")


@st.composite
def policies(draw: st.DrawFn, *, approved: bool) -> Policy:
    """A policy; ``approved``: one that asks, and an edit (if any) the guard should run."""
    kind = draw(st.sampled_from([k for k in WHEN_KINDS if not (approved and k == "false")]))
    when = (kind, draw(st.sampled_from(NON_BOOLS))) if kind == "nonbool" else (kind,)
    amount = ASK_FROM + 100 if approved else draw(st.sampled_from([4900, ASK_FROM + 100]))
    editable = draw(st.sampled_from(EDITABLES))
    edits = ["none"]
    if editable:
        edits += ["valid", "valid"] + ([] if approved else ["wrong_type"])
    if not approved:
        edits.append("non_editable")
    edit = draw(st.sampled_from(edits))
    changes: dict[str, Any] = {}
    if edit == "valid":
        for name in draw(st.sampled_from([n for n in (editable[:1], editable[1:], editable) if n])):
            changes[name] = draw(st.sampled_from(VALID_EDITS[name]))
    elif edit == "wrong_type":
        name = draw(st.sampled_from(editable))
        changes[name] = draw(st.sampled_from(WRONG_TYPED_EDITS[name]))
        others = [n for n in editable if n != name]
        beside = draw(st.booleans())  # beside a valid edit: the whole edit is refused
        if others and beside:
            changes[others[0]] = draw(st.sampled_from(VALID_EDITS[others[0]]))
    elif edit == "non_editable":
        name = draw(st.sampled_from([n for n in NON_EDITABLE_EDITS if n not in editable]))
        changes[name] = NON_EDITABLE_EDITS[name]
    return Policy(
        when=when,
        amount=amount,
        redact=draw(st.sampled_from(REDACTS)),
        editable=editable,
        edit=edit,
        changes=tuple(sorted(changes.items())),
    )


@attrs.frozen
class Schedule:
    creates: tuple[tuple[Any, ...], ...]  # what happens to the 1st, 2nd, ... create
    polls: tuple[tuple[Any, ...], ...]
    cancels: tuple[tuple[Any, ...], ...]
    decision: str  # approve / approve_expired / deny / cancel / none
    valid_for: float
    decide_after: float
    clock_offset: float  # seconds the provider's clock is ahead
    limit: float
    abandon_after: float | None
    policy: Policy


GENERAL = st.builds(
    Schedule,
    creates=st.lists(FAULT, max_size=4).map(tuple),
    polls=st.lists(FAULT, max_size=5).map(tuple),
    cancels=st.lists(FAULT, max_size=2).map(tuple),
    decision=st.sampled_from(["approve", "approve", "approve_expired", "deny", "cancel", "none"]),
    valid_for=st.sampled_from([1.0, 2.0, 5.0, 60.0, 300.0]),
    decide_after=st.sampled_from([0.0, 0.05, 0.3, 0.8, 1.5]),
    clock_offset=st.sampled_from([0.0, 0.0, -600.0, -90.0, -2.0, 2.0, 90.0, 600.0]),
    # 1.5 s is too little to ask at all (margins 2 s): nothing may be created.
    limit=st.sampled_from([1.5, 3.0, 3.0, 3.5, 4.0]),
    abandon_after=st.one_of(st.none(), st.none(), st.none(), st.sampled_from([0.0, 0.3, 1.0])),
    policy=policies(approved=False),
)
#: Faults a call can ride out and still use its approval (one each at most, so
#: retries fit in the limit): the approved path under hostile headers and loss.
RECOVERABLE = st.one_of(
    st.just(("ok",)),
    st.just(("drop_after_commit",)),
    st.just(("reset_before",)),
    st.tuples(st.just("5xx"), st.sampled_from([500, 502, 503, 504])),
    st.tuples(st.just("429"), st.sampled_from([0, 1])),
    st.tuples(
        st.just("retry_after"), st.sampled_from([429, 503]), st.sampled_from(HOSTILE_RETRY_AFTER)
    ),
)
#: A person approves in time, nobody abandons: the approval should be used, so
#: that at least a third of all schedules exercise the path that runs the tool.
APPROVED_PATH = st.builds(
    Schedule,
    creates=st.lists(RECOVERABLE, max_size=1).map(tuple),
    polls=st.lists(st.one_of(RECOVERABLE, st.just(("garbage",))), max_size=1).map(tuple),
    cancels=st.lists(FAULT, max_size=1).map(tuple),
    decision=st.just("approve"),
    valid_for=st.sampled_from([5.0, 60.0, 300.0]),
    decide_after=st.sampled_from([0.0, 0.05, 0.3]),
    clock_offset=st.sampled_from([0.0, -600.0, -2.0, 2.0, 600.0]),
    limit=st.sampled_from([3.5, 4.0]),
    abandon_after=st.none(),
    policy=policies(approved=True),
)
SCHEDULE = st.one_of(APPROVED_PATH, GENERAL)


def _queue(provider: LocalProvider, exchange: str, plan: tuple[tuple[Any, ...], ...]) -> None:
    """Queue one fault per planned exchange, in order; "ok" is a zero delay (no effect)."""
    for step in plan:
        kind = step[0]
        if kind == "ok":
            provider.faults.add("delay", on=exchange, delay=0.0)
        elif kind == "5xx":
            provider.faults.add("status", on=exchange, status=step[1])
        elif kind == "429":
            provider.faults.add("status", on=exchange, status=429, retry_after=step[1])
        elif kind == "delay":
            provider.faults.add("delay", on=exchange, delay=DELAYS[exchange])
        elif kind == "retry_after":
            provider.faults.add("status", on=exchange, status=step[1], retry_after=step[2])
        elif kind == "date":
            value = step[1]
            if value in ("stale", "ahead"):
                hour = timedelta(hours=-1 if value == "stale" else 1)
                value = format_http_date(provider.store.now() + hour)
            provider.faults.add("headers", on=exchange, headers={"Date": value})
        else:
            provider.faults.add(kind, on=exchange)


# --------------------------------------------------------------------------- fixtures


@attrs.define
class Tally:
    schedules: int = 0
    violations: list[str] = attrs.Factory(list)
    faults: Counter[str] = attrs.Factory(Counter)
    outcomes: Counter[str] = attrs.Factory(Counter)
    decisions: Counter[str] = attrs.Factory(Counter)
    abandoned: int = 0
    ran_with_edit: int = 0
    edits: Counter[str] = attrs.Factory(Counter)
    policies: Counter[str] = attrs.Factory(Counter)
    proxied: int = 0
    longest_overrun: float = -math.inf
    seconds: float = 0.0
    lock: threading.Lock = attrs.Factory(threading.Lock)


class TrapProxy:
    """A proxy on 127.0.0.1 that answers nobody and counts who connected to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


@pytest.fixture(scope="module")
def trap_proxy() -> Iterator[TrapProxy]:
    proxy = TrapProxy()
    yield proxy
    proxy.close()


@attrs.define
class Bench:
    provider: LocalProvider
    guard: ag.Guard


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """Counts across the module; written to JSON and the terminal when it ends."""
    counts = Tally()
    started = time.monotonic()
    yield counts
    counts.seconds = time.monotonic() - started
    summary = {
        "schedules": counts.schedules,
        "violations": len(counts.violations),
        "violation_details": counts.violations[:20],
        "faults_injected": dict(sorted(counts.faults.items())),
        "outcomes": dict(sorted(counts.outcomes.items())),
        "reviewer_acted_before_the_call_returned": dict(sorted(counts.decisions.items())),
        "abandoned": counts.abandoned,
        "ran_with_an_edit": counts.ran_with_edit,
        "edits_approved_or_tried": dict(sorted(counts.edits.items())),
        "policies": dict(sorted(counts.policies.items())),
        "with_proxy_variables_set": counts.proxied,
        "worst_return_vs_limit_seconds": round(counts.longest_overrun, 3),
        "seconds": round(counts.seconds, 1),
        "settings": {
            "batch": BATCH,
            "hypothesis_examples": EXAMPLES,
            "poll_wait": POLL_WAIT,
            "read_slack": READ_SLACK,
            "create_timeout": CREATE_TIMEOUT,
            "cancel_timeout": CANCEL_TIMEOUT,
            "cancel_retry_window": CANCEL_RETRY_WINDOW,
            "return_margin": RETURN_MARGIN,
            "deadline_margin": DEADLINE_MARGIN,
        },
    }
    # The committed figures change only on purpose (a CI run leaves the tree clean).
    if counts.schedules and os.environ.get("APPROVAL_GUARD_RECORD_RESULTS") == "1":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    line = (
        f"fault schedules: {counts.schedules} run, "
        f"{sum(counts.faults.values())} faults injected "
        f"({', '.join(f'{k} {v}' for k, v in sorted(counts.faults.items()))}), "
        f"outcomes {dict(sorted(counts.outcomes.items()))}, "
        f"{counts.ran_with_edit} ran with an edit, "
        f"violations: {len(counts.violations)}"
    )
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        # Straight to the terminal, whatever -s says: the counts are part of the result.
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(line)
    else:
        print(line)


@pytest.fixture(scope="module")
def benches() -> Iterator[list[Bench]]:
    """BATCH providers, each with its Guard, shared by every example; read timeouts cut down."""
    timings = Timings(
        read_slack=READ_SLACK,
        create_timeout=CREATE_TIMEOUT,
        cancel_timeout=CANCEL_TIMEOUT,
        cancel_retry_window=CANCEL_RETRY_WINDOW,
    )
    providers = [LocalProvider().start() for _ in range(BATCH)]
    try:
        yield [
            Bench(
                provider=p,
                guard=ag.Guard(
                    base_url=p.url,
                    credential=p.credential,
                    harness_limit="1m",
                    poll_wait=POLL_WAIT,
                    return_margin=RETURN_MARGIN,
                    deadline_margin=DEADLINE_MARGIN,
                    timings=timings,
                    redaction_key=REDACTION_KEY,
                ),
            )
            for p in providers
        ]
    finally:
        for p in providers:
            p.close()


# --------------------------------------------------------------------------- one schedule


def _marker(value: Any) -> dict[str, str]:
    """The marker the guard must send for ``value``: HMAC-SHA256 under REDACTION_KEY, 12 hex."""
    digest = hmac.new(REDACTION_KEY, canonical_json(value).encode(), hashlib.sha256)
    return {"$redacted": digest.hexdigest()[:12]}


def _at(arguments: dict[str, Any], path: str) -> Any:
    value: Any = arguments
    for part in path.split("."):
        value = value[part]
    return value


def _as_sent(real: dict[str, Any], redact: tuple[str, ...]) -> dict[str, Any]:
    """``real`` as the provider must see it: each redacted path a marker of its real value."""
    sent = copy.deepcopy(real)
    for path in redact:
        *parents, last = path.split(".")
        holder = _at(sent, ".".join(parents)) if parents else sent
        holder[last] = _marker(holder[last])
    return sent


def _find(provider: LocalProvider, case: str) -> list[ApprovalRequest]:
    return [r for r in provider.requests() if r.arguments.get("case") == case]


def _decide(
    provider: LocalProvider, schedule: Schedule, case: str, returned: threading.Event
) -> str | None:
    """Play the reviewer: act ``decide_after`` s after the request appears, if still waited on."""
    end = time.monotonic() + schedule.limit + 1
    request = None
    while request is None:
        if returned.is_set() or time.monotonic() > end:
            return None
        pending = [r for r in _find(provider, case) if r.status == PENDING]
        request = pending[0] if pending else None
        if request is None:
            time.sleep(0.01)
    if returned.wait(schedule.decide_after):
        return None  # the call is over: nobody acts on it any more
    # An edit is made on what the reviewer sees: redacted values stay markers.
    changes = dict(schedule.policy.changes)
    edited = {**request.arguments, **changes} if changes else None
    try:
        if schedule.decision == "approve":
            provider.approve(request.id, valid_for=schedule.valid_for, arguments=edited)
        elif schedule.decision == "approve_expired":
            provider.approve(request.id, valid_for=-schedule.valid_for, arguments=edited)
        elif schedule.decision == "deny":
            provider.deny(request.id, note="no")
        elif schedule.decision == "cancel":
            provider.cancel(request.id, reason="withdrawn at the provider")
        else:
            return None
    except NotPendingError:
        return None  # expired or withdrawn first
    except InvalidEdit:
        return "edit_refused"  # the provider refused the edit: as if nobody acted
    return schedule.decision


def run_schedule(bench: Bench, schedule: Schedule) -> tuple[list[str], dict[str, Any]]:
    """Run one schedule; return the broken invariants (none, we hope) and what happened."""
    provider, guard = bench.provider, bench.guard
    case = uuid.uuid4().hex
    provider.clock_offset = timedelta(seconds=schedule.clock_offset)
    provider.faults.clear()
    provider.stats.reset()
    _queue(provider, "create", schedule.creates)
    _queue(provider, "poll", schedule.polls)
    _queue(provider, "cancel", schedule.cancels)

    policy = schedule.policy
    # Fresh secrets each schedule, in forms no id, digest or timestamp can contain.
    number = uuid.uuid4().int
    real: dict[str, Any] = {
        "case": case,
        "amount": policy.amount,
        "memo": MEMO,
        "token": f"sk_live_{uuid.uuid4().hex}",
        "card": {
            "holder": HOLDER,
            "number": "4111-" + "-".join(f"{number // 10**k % 10**4:04d}" for k in (0, 4, 8)),
        },
    }
    sent = _as_sent(real, policy.redact)
    secrets = [_at(real, path) for path in policy.redact]
    changes = dict(policy.changes)
    runs: list[datetime] = []
    received: list[dict[str, Any]] = []

    @guard.requires_approval(
        timeout="30m",
        tool="fault_tool",
        when=policy.predicate(),
        redact=policy.redact or None,
        editable=policy.editable,
    )
    def fault_tool(case: str, amount: int, memo: str, token: str, card: dict[str, str]) -> str:
        runs.append(provider.store.now())  # the provider's clock, as the tool starts
        received.append(
            {"case": case, "amount": amount, "memo": memo, "token": token, "card": dict(card)}
        )
        return "ran"

    returned = threading.Event()
    abandon = threading.Event()
    acted: list[str | None] = []
    reviewer = threading.Thread(
        target=lambda: acted.append(_decide(provider, schedule, case, returned)), daemon=True
    )
    abandoner = None
    if schedule.abandon_after is not None:
        delay = schedule.abandon_after

        def _abandon() -> None:
            if not returned.wait(delay):
                abandon.set()

        abandoner = threading.Thread(target=_abandon, daemon=True)
    reviewer.start()
    if abandoner is not None:
        abandoner.start()
    started = time.monotonic()
    with ag.harness_call(limit=schedule.limit, abandon=abandon):
        out = fault_tool(case, policy.amount, MEMO, real["token"], dict(real["card"]))
    elapsed = time.monotonic() - started
    returned.set()
    reviewer.join(5)
    if abandoner is not None:
        abandoner.join(5)

    # Let delayed exchanges the guard gave up on finish before judging the store.
    log = provider.faults.log
    settle = 0.0
    for record in log:
        if record.kind == "delay":
            extra = POLL_WAIT + 0.05 if record.exchange == "poll" else 0.05
            settle = max(settle, record.at + DELAYS[record.exchange] + extra)
    time.sleep(max(0.0, settle - time.monotonic()))
    provider.faults.clear()

    # Which planned steps were actually used: faults are taken in order per exchange.
    used: Counter[str] = Counter()
    used_on: Counter[str] = Counter()
    taken: Counter[str] = Counter()
    plans = {"create": schedule.creates, "poll": schedule.polls, "cancel": schedule.cancels}
    for record in log:
        step = plans[record.exchange][taken[record.exchange]]
        taken[record.exchange] += 1
        if step[0] != "ok":
            used[f"{step[0]} on {record.exchange}"] += 1
            used_on[record.exchange] += 1

    stored = _find(provider, case)
    request = stored[0] if stored else None
    action = acted[0] if acted else None
    bad: list[str] = []
    is_not_run = isinstance(out, ag.NotRun)
    reason = out.reason if isinstance(out, ag.NotRun) else None

    if len(runs) > 1:
        bad.append(f"the tool ran {len(runs)} times")
    if len(stored) > 1:
        bad.append(f"{len(stored)} requests were created for one call")
    if request is not None and (
        request.tool != "fault_tool"
        or request.arguments != sent
        or tuple(request.editable or ()) != policy.editable
    ):
        bad.append(f"the request is not of the call as sent (redacted): {request}")
    if policy.skips:
        # when= said exactly False: the tool runs at once, as called, and nothing is asked;
        # unless the harness had already abandoned the call: then it does not start at all.
        gave_up_first = not runs and reason is ag.Reason.CANCELLED and abandon.is_set()
        if not gave_up_first and (len(runs) != 1 or out != "ran"):
            bad.append(f"when= returned False, yet the tool ran {len(runs)} times")
        if received and received[0] != real:
            bad.append(f"when= returned False, yet the tool got {received[0]}, not {real}")
        if stored or provider.stats.creates:
            bad.append(
                f"when= returned False, yet {provider.stats.creates} creates were sent "
                f"and {len(stored)} requests exist"
            )
    elif runs:
        if out != "ran":
            bad.append(f"the tool ran but the call returned {out!r}")
        if request is None or request.status != APPROVED or action != "approve":
            bad.append(f"the tool ran without an approval (action {action}, {request})")
        else:
            assert request.decision is not None and request.decision.expires_at is not None
            if runs[0] >= request.decision.expires_at:
                bad.append(
                    f"the tool started at {runs[0]} (provider clock), after the approval "
                    f"expired at {request.decision.expires_at}"
                )
            if policy.edit == "wrong_type":
                bad.append(f"the tool ran after an approval that set a wrong-typed value {changes}")
            # What a person saw (real values behind the markers), with their valid edits.
            valid = changes if policy.edit == "valid" else {}
            expected = {**real, **valid}
            got = received[0]
            if got != expected or any(type(got[k]) is not type(v) for k, v in expected.items()):
                bad.append(f"the tool got {got}, not what the reviewer saw or set: {expected}")
            row = guard.ledger.get(request.id)
            digest = hashlib.sha256(canonical_json({**sent, **valid}).encode()).hexdigest()
            if row is None or row.arguments_digest != digest:
                bad.append(f"the ledger's arguments_digest is not that of what ran: {row}")
    elif not is_not_run:
        bad.append(f"the tool did not run but the call returned {out!r}")
    # Asking means a create is sent, unless there was no room to ask or a create failed.
    # The guard asks only with a whole second before its own end (limit - RETURN_MARGIN)
    # when it plans the create; on a loaded machine that moment can come LIMIT_TOLERANCE
    # late, so a schedule closer to the edge than that may be refused, but only honestly:
    # with create's own "too little time" NotRun, never another reason to send nothing.
    room = schedule.limit - RETURN_MARGIN - DEADLINE_MARGIN >= 1
    near_edge = schedule.limit - RETURN_MARGIN < 1 + LIMIT_TOLERANCE
    refused_in_time = (
        near_edge
        and isinstance(out, ag.NotRun)
        and ag.Reason.NOT_OBTAINED == out.reason
        and out.message.startswith("Too little of the harness's time limit was left")
    )
    asked = stored or used_on["create"] or abandon.is_set()
    if room and not refused_in_time and not policy.skips and not asked:
        bad.append(f"when= {policy.when} means ask, yet no request exists and no create failed")
    if secrets:
        provider_saw = [repr(r) for r in stored] + [repr(provider.history(r.id)) for r in stored]
        if any(secret in text for secret in secrets for text in provider_saw):
            bad.append(f"a value redacted by {policy.redact} reached the provider")
        if isinstance(out, ag.NotRun) and any(
            secret in text for secret in secrets for text in (out.to_json(), repr(out))
        ):
            bad.append(f"a value redacted by {policy.redact} is in the NotRun")
    if reason == ag.Reason.DENIED and (
        action != "deny" or request is None or request.status != DENIED
    ):
        bad.append(f"DENIED without a person's denial (action {action}, {request})")
    if reason == ag.Reason.ALREADY_EXECUTED:
        bad.append("ALREADY_EXECUTED for a call that never ran")
    if reason == ag.Reason.CANCELLED and not abandon.is_set() and action != "cancel":
        bad.append("CANCELLED although nobody abandoned or withdrew the call")
    if reason == ag.Reason.APPROVAL_EXPIRED and (request is None or request.status != APPROVED):
        bad.append(f"APPROVAL_EXPIRED without an approval: {request}")
    if elapsed > schedule.limit + LIMIT_TOLERANCE:
        bad.append(f"returned after {elapsed:.2f} s, limit {schedule.limit} s")
    if (
        reason in (ag.Reason.NOT_OBTAINED, ag.Reason.CANCELLED)
        and request is not None
        and request.status == PENDING
        and isinstance(out, ag.NotRun)
        and out.request_id is not None
    ):
        # The one excuse: the provider failed every cancel attempt, and a Retry-After
        # of 1 s among them left no room in the cancel's budget for another.
        cancels = provider.stats.cancels
        excused = cancels >= 1 and cancels == used_on["cancel"] and ("429", 1) in schedule.cancels
        if not excused:
            bad.append(
                f"{reason.value}: request {request.id} left pending (cancels sent: {cancels})"
            )
        if "could not be withdrawn" not in out.message:
            bad.append(f"the message hides that the request stays pending: {out.message!r}")
    if (
        isinstance(out, ag.NotRun)
        and "request was cancelled" in out.message
        and (request is None or request.status != CANCELLED)
    ):
        bad.append(f"the message says cancelled, the request is {request}")
    if (
        isinstance(out, ag.NotRun)
        and out.request_id is not None
        and (request is None or out.request_id != request.id)
    ):
        bad.append(f"NotRun names request {out.request_id}, not the one created")

    if runs:
        outcome = "ran_without_asking" if policy.skips else "ran"
    else:
        outcome = reason.value if reason else "?"
    facts = {
        "outcome": outcome,
        "edited": outcome == "ran" and bool(changes) and policy.edit == "valid",
        # The reviewer approved (or tried to) with an edit: which kind.
        "edit_tried": policy.edit
        if changes and action in ("approve", "approve_expired", "edit_refused")
        else None,
        "policy": [
            f"when {policy.when[0]}",
            f"redact {'+'.join(policy.redact) or 'none'}",
            f"editable {'+'.join(policy.editable) or 'none'}",
        ],
        "faults": used,
        "action": action or "none",
        "abandoned": abandon.is_set(),
        "overrun": elapsed - schedule.limit,
    }
    if bad:
        bad = [f"{b} [schedule {schedule}, outcome {out!r}, faults {log}]" for b in bad]
    return bad, facts


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    # Shrinking a batch of concurrent, timed schedules is slow and rarely helps: each
    # violation already names its whole schedule.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@pytest.mark.slow
@given(batch=st.lists(SCHEDULE, min_size=BATCH, max_size=BATCH), proxied=st.booleans())
def test_no_fault_schedule_breaks_the_call_rules(
    benches: list[Bench],
    tally: Tally,
    trap_proxy: TrapProxy,
    batch: list[Schedule],
    proxied: bool,
) -> None:
    """Runs at most once, only when validly approved; never a false DENIED; one request; bounded."""
    before = trap_proxy.connections
    with pytest.MonkeyPatch.context() as mp:
        if proxied:  # a plain-http provider must never be reached through a proxy
            for name in PROXY_VARIABLES:
                mp.setenv(name, trap_proxy.url)
            mp.delenv("NO_PROXY", raising=False)
            mp.delenv("no_proxy", raising=False)
        with ThreadPoolExecutor(max_workers=BATCH) as pool:
            results = list(pool.map(run_schedule, benches, batch))
    violations = [v for bad, _ in results for v in bad]
    if trap_proxy.connections != before:
        violations.append(f"{trap_proxy.connections - before} connections went to the proxy")
    with tally.lock:
        for _, facts in results:
            tally.schedules += 1
            tally.faults.update(facts["faults"])
            tally.outcomes[facts["outcome"]] += 1
            tally.decisions[facts["action"]] += 1
            tally.abandoned += facts["abandoned"]
            tally.ran_with_edit += facts["edited"]
            if facts["edit_tried"] is not None:
                tally.edits[facts["edit_tried"]] += 1
            tally.policies.update(facts["policy"])
            tally.proxied += proxied
            tally.longest_overrun = max(tally.longest_overrun, facts["overrun"])
        tally.violations.extend(violations)
    assert not violations, "\n".join(violations[:5])


@pytest.mark.slow
def test_at_least_a_third_of_the_schedules_use_an_approval(tally: Tally) -> None:
    """The draw is weighted so the path that runs the tool is exercised, not just refusals."""
    if tally.schedules == 0:
        pytest.skip("run with the schedules above (this reads their counts)")
    assert tally.outcomes["ran"] * 3 >= tally.schedules, dict(tally.outcomes)


@pytest.mark.slow
def test_the_draw_reaches_edits_skips_and_refused_edits(tally: Tally) -> None:
    """Some schedules run with an edit or without asking; both kinds of bad edit are tried."""
    if tally.schedules == 0:
        pytest.skip("run with the schedules above (this reads their counts)")
    assert tally.ran_with_edit >= 1, dict(tally.outcomes)
    assert tally.outcomes["ran_without_asking"] >= 1, dict(tally.outcomes)
    assert tally.edits["wrong_type"] >= 1 and tally.edits["non_editable"] >= 1, dict(tally.edits)
