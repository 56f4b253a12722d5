"""The ``approval-guard`` command: run the local provider, review requests, run the demo.

::

    approval-guard serve [--db PATH] [--host HOST] [--port PORT]
    approval-guard list [--status STATUS] [--json]
    approval-guard show ID
    approval-guard approve ID [--note TEXT] [--valid-for 5m]
    approval-guard deny ID --note TEXT
    approval-guard cancel ID [--reason TEXT]        (instance credential)
    approval-guard demo [--decide approve|deny] [--after 2s] [--port 0]

The reviewer commands talk to a running provider. They read, at call time:

==================================  ============================================
``--url`` / ``APPROVAL_GUARD_URL``  the provider (default ``http://127.0.0.1:8765``)
``--token`` /                       a *reviewer* credential: list, show, approve,
``APPROVAL_GUARD_REVIEWER_TOKEN``   deny
``--credential`` /                  an *instance* credential: ``cancel`` only, since
``APPROVAL_GUARD_CREDENTIAL``       the API lets only the credential that created a
                                    request withdraw it
==================================  ============================================

Prefer the environment variables to ``--token``: a command line is visible to
other users of the machine. Exit codes: 0 success, 1 failure, 2 usage.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from approval_guard import _client, _duration, _wire
from approval_guard._clock import SystemClock
from approval_guard._display import escape, escape_lines
from approval_guard.provider._store import MAX_JSON_DEPTH, dump_json, load_json

if TYPE_CHECKING:
    from approval_guard.provider import FirstStartTokens

PROG = "approval-guard"
DEFAULT_URL = "http://127.0.0.1:8765"
DEFAULT_PORT = 8765
ENV_URL = "APPROVAL_GUARD_URL"
ENV_REVIEWER_TOKEN = "APPROVAL_GUARD_REVIEWER_TOKEN"
ENV_CREDENTIAL = "APPROVAL_GUARD_CREDENTIAL"
HTTP_TIMEOUT = 10.0

#: The demo's refund, as an agent might ask for it.
DEMO_ARGUMENTS: dict[str, Any] = {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}

Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """A failure worth one line on stderr and exit code 1."""


# ----------------------------------------------------------------------------- output helpers


def _safe(text: str) -> str:
    """Make provider text safe for a terminal: hidden characters escaped, as on the page.

    Tool names and arguments come from a model; an escape sequence in them must
    not be able to rewrite the reviewer's screen, nor a bidi override reverse them.
    """
    return escape(text)


def _pretty_json(value: Any, *, indent: str = "") -> str:
    """Readable JSON with every number exactly as stored, each line terminal-safe."""
    text = escape_lines(dump_json(value, indent=2))
    return "\n".join(indent + line for line in text.splitlines())


def _compact_json(value: Any, *, width: int) -> str:
    text = _safe(dump_json(value))
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _local_time(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _time_left(deadline: datetime, *, now: datetime | None = None) -> str:
    """``"29m 54s left"``; ``"deadline passed"`` once it has."""
    now = now or datetime.now(timezone.utc)
    seconds = int((deadline - now).total_seconds())
    if seconds <= 0:
        return "deadline passed"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s left"
    if minutes:
        return f"{minutes}m {secs:02d}s left"
    return f"{secs}s left"


def _say(message: str = "", *, stream: TextIO | None = None) -> None:
    print(message, file=stream or sys.stdout, flush=True)


# ----------------------------------------------------------------------------- HTTP


class ReviewerClient:
    """The provider's API as the CLI uses it; every failure becomes a :class:`CliError`.

    It sends through the library's one HTTP client, ``approval_guard._client.ProviderClient``
    (Bearer set as requests' auth so no ``.netrc`` replaces it, no environment
    proxy for plain http, bounded answers); ``credential`` never appears in a message.
    """

    def __init__(self, url: str, credential: str, *, timeout: float = HTTP_TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self._timeout = timeout
        self._client = _client.ProviderClient(self.url, credential, clock=SystemClock())

    def __repr__(self) -> str:
        return f"ReviewerClient(url={self.url!r})"

    def close(self) -> None:
        """Release pooled connections."""
        self._client.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        request_id: str | None = None,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        """Send one call; return the decoded JSON or raise :class:`CliError`."""
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        try:
            answer = self._client.call(
                method, path, payload=body, timeout=self._timeout, decode=_exact_json
            )
        except _client.TransportError as exc:
            if exc.kind == "connection":
                raise CliError(
                    f"no provider is answering at {self.url}; start one with `{PROG} serve`"
                ) from None
            if exc.kind == "timeout":
                raise CliError(
                    f"the provider at {self.url} did not answer within {self._timeout:g}s"
                ) from None
            raise CliError(
                f"could not use the answer of the provider at {self.url}: {_safe(exc.message)}"
            ) from None
        if answer.ok:
            return answer.body
        raise self._error(answer.status, answer.body, request_id)

    def _error(self, status: int, data: Any, request_id: str | None) -> CliError:
        kind, message = _wire.parse_error(data) or (f"http_{status}", "")
        if status == 401:
            return CliError(
                f"the provider at {self.url} refused the credential (401 unauthorized); "
                "check --token / --credential and the environment variables"
            )
        if status == 403:
            return CliError(
                f"the provider at {self.url} does not allow this credential to do that "
                f"(403 forbidden){': ' + _safe(message) if message else ''}"
            )
        if status == 404 and request_id is not None:
            return CliError(f"no request with id {_safe(request_id)} at {self.url} (404 not found)")
        if kind == "not_pending" and request_id is not None:
            current = data.get("request") if isinstance(data, dict) else None
            state = current.get("status") if isinstance(current, dict) else None
            now = f": it is {_safe(str(state))}" if state else ""
            return CliError(f"request {_safe(request_id)} is no longer pending{now}")
        detail = f": {_safe(message)}" if message else ""
        return CliError(f"the provider answered {status} {_safe(kind)}{detail}")

    # The calls themselves.

    def list_requests(self, status: str | None = None) -> list[_wire.ApprovalRequest]:
        """Every request, newest first, optionally only those with ``status``.

        A list answer is one page (1,000 at most): the pages are followed through
        ``next_before`` to the last, so an old pending request is never left out.
        """
        out: list[_wire.ApprovalRequest] = []
        seen: set[str] = set()
        before: str | None = None
        while True:
            params = {"status": status} if status else {}
            if before is not None:
                params["before"] = before
            data = self.call("GET", "/v1/requests", params=params or None)
            items = data.get("requests", data.get("items")) if isinstance(data, dict) else data
            if not isinstance(items, list):
                raise CliError(f"the provider at {self.url} answered a list in an unknown shape")
            fresh = [r for r in (_parse(item) for item in items) if r.id not in seen]
            out.extend(fresh)
            seen.update(r.id for r in fresh)
            following = data.get("next_before") if isinstance(data, dict) else None
            # A page with nothing new ends it too: a provider's cursor cannot loop us.
            if not fresh or not isinstance(following, str):
                return out
            before = following

    def get(self, request_id: str) -> _wire.ApprovalRequest:
        """One request."""
        return _parse(self.call("GET", f"/v1/requests/{_quote(request_id)}", request_id=request_id))

    def history(self, request_id: str) -> dict[str, Any]:
        """The request's audit trail: ``{"events": [...], "poll_count": N, ...}``."""
        data = self.call("GET", f"/v1/requests/{_quote(request_id)}/history", request_id=request_id)
        return data if isinstance(data, dict) else {}

    def decide(
        self, request_id: str, status: str, *, note: str | None, valid_for: str | None = None
    ) -> _wire.ApprovalRequest:
        """Record a reviewer's decision."""
        body: dict[str, Any] = {"status": status, "note": note}
        if valid_for is not None:
            body["valid_for"] = valid_for
        data = self.call(
            "POST", f"/v1/requests/{_quote(request_id)}/decision", request_id=request_id, body=body
        )
        return _parse(data.get("request", data) if isinstance(data, dict) else data)

    def cancel(self, request_id: str, *, reason: str | None) -> _wire.ApprovalRequest:
        """Withdraw a pending request (instance credential)."""
        body = {"reason": reason} if reason else None
        data = self.call(
            "POST", f"/v1/requests/{_quote(request_id)}/cancel", request_id=request_id, body=body
        )
        return _parse(data)


# An answer holds the arguments this many levels down at most: a list answer,
# its "requests" array, the request object.
_ENVELOPE_DEPTH = 3


def _exact_json(raw: bytes) -> Any:
    """The provider's answer with every number as sent (``1e400`` is not ``inf``).

    Arguments may nest as deep as the provider accepts them (``MAX_JSON_DEPTH``);
    the answer around them adds a few levels, which must not make it unreadable.
    """
    return load_json(raw.decode("utf-8"), max_depth=MAX_JSON_DEPTH + _ENVELOPE_DEPTH)


def _quote(request_id: str) -> str:
    return urllib.parse.quote(request_id, safe="")


def _parse(obj: Any) -> _wire.ApprovalRequest:
    try:
        return _wire.parse_request(obj)
    except _wire.WireError as exc:
        raise CliError(f"the provider sent a request object this CLI cannot read: {exc}") from None


# ----------------------------------------------------------------------------- reviewer commands


def _reviewer(args: argparse.Namespace) -> ReviewerClient:
    if not args.token:
        raise CliError(
            f"no reviewer token: pass --token or set {ENV_REVIEWER_TOKEN} "
            f"(`{PROG} serve` printed it on its first start)"
        )
    return ReviewerClient(args.url, args.token)


def _describe(request: _wire.ApprovalRequest) -> list[tuple[str, str]]:
    rows = [
        ("request", request.id),
        ("tool", request.tool),
        ("status", request.status),
        ("created", _local_time(request.created_at)),
        ("timeout", request.timeout),
    ]
    deadline = _local_time(request.deadline_at)
    if request.is_pending:
        deadline += f" ({_time_left(request.deadline_at)})"
    rows.append(("deadline", deadline))
    if request.decision is not None:
        rows.append(("decided", _local_time(request.decision.decided_at)))
        if request.decision.expires_at is not None:
            rows.append(("valid until", _local_time(request.decision.expires_at)))
        rows.append(("note", request.decision.note if request.decision.note else "(none)"))
    if request.cancelled_at is not None:
        rows.append(("cancelled", _local_time(request.cancelled_at)))
    return rows


def _when(request: _wire.ApprovalRequest) -> str:
    """Time left for a pending request; when it closed for the others."""
    if request.is_pending:
        return _time_left(request.deadline_at)
    closed = request.deadline_at  # expired: the deadline is when
    if request.decision is not None:
        closed = request.decision.decided_at
    elif request.cancelled_at is not None:
        closed = request.cancelled_at
    return closed.astimezone().strftime("%m-%d %H:%M:%S")


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: requests, newest first."""
    client = _reviewer(args)
    try:
        requests_ = client.list_requests(args.status)
    finally:
        client.close()
    if args.json:
        # Exact numbers as stored (a JSONNumber is no Python number), ASCII for the terminal.
        listed = [_wire.request_to_json(r) for r in requests_]
        _say(dump_json(listed, indent=2, ensure_ascii=True))
        return 0
    if not requests_:
        _say(f"no {args.status} requests" if args.status else "no requests")
        return 0
    _say(f"{'ID':<36}  {'STATUS':<9}  {'TOOL':<20}  {'WHEN':<16}  ARGUMENTS")
    for r in requests_:
        tool = _safe(r.tool)
        tool = tool if len(tool) <= 20 else tool[:19] + "…"
        args_text = _compact_json(r.arguments, width=60)
        _say(f"{_safe(r.id):<36}  {r.status:<9}  {tool:<20}  {_when(r):<16}  {args_text}")
    return 0


def _history_line(event: dict[str, Any]) -> str:
    """One audit event: ``  <local time>  <type>  by <name> (<kind>)  key=value ...``."""
    try:
        at = _local_time(_wire.parse_timestamp(event.get("at"), field="at"))
    except _wire.WireError:
        at = _safe(str(event.get("at", "")))
    parts = [f"  {at:<25}", f"{_safe(str(event.get('type', 'event'))):<10}"]
    actor = event.get("actor")
    if isinstance(actor, dict) and actor.get("name"):
        parts.append(f"by {_safe(str(actor['name']))} ({_safe(str(actor.get('kind', '?')))})")
    detail = event.get("detail")
    if isinstance(detail, dict):
        parts.extend(
            f"{_safe(str(k))}={_compact_json(v, width=80)}"
            for k, v in detail.items()
            if v is not None
        )
    return "  ".join(parts).rstrip()


def cmd_show(args: argparse.Namespace) -> int:
    """``show ID``: one request with its arguments and audit trail."""
    client = _reviewer(args)
    try:
        request = client.get(args.id)
        history = client.history(args.id)
    finally:
        client.close()
    for label, value in _describe(request):
        _say(f"{label:<12} {_safe(value)}")
    _say("arguments")
    _say(_pretty_json(request.arguments, indent="  "))
    events = [e for e in history.get("events", []) if isinstance(e, dict)]
    polls = history.get("poll_count")
    _say("history" + (f" (polled {polls} times by the adapter)" if isinstance(polls, int) else ""))
    for event in events:
        _say(_history_line(event))
    if not events:
        _say("  (none)")
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    """``approve ID``: the call may start until the approval's ``expires_at``."""
    client = _reviewer(args)
    try:
        request = client.decide(args.id, _wire.APPROVED, note=args.note, valid_for=args.valid_for)
    finally:
        client.close()
    expires = request.decision.expires_at if request.decision else None
    until = f"; the call may start until {_local_time(expires)}" if expires else ""
    _say(f"approved {_safe(request.id)} ({_safe(request.tool)}){until}")
    return 0


def cmd_deny(args: argparse.Namespace) -> int:
    """``deny ID --note TEXT``: the call will not run; the note tells the agent why."""
    if not args.note.strip():
        raise CliError("--note must say why: the agent receives it as the reason")
    client = _reviewer(args)
    try:
        request = client.decide(args.id, _wire.DENIED, note=args.note)
    finally:
        client.close()
    _say(f"denied {_safe(request.id)} ({_safe(request.tool)})")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """``cancel ID``: withdraw a pending request, with the instance credential that made it."""
    if not args.credential:
        raise CliError(
            f"cancel needs the instance credential that created the request: pass --credential "
            f"or set {ENV_CREDENTIAL} (a reviewer token cannot cancel; deny it instead)"
        )
    client = ReviewerClient(args.url, args.credential)
    try:
        request = client.cancel(args.id, reason=args.reason)
    finally:
        client.close()
    _say(f"cancelled {_safe(request.id)} ({_safe(request.tool)})")
    return 0


# ----------------------------------------------------------------------------- serve


@contextmanager
def _on_sigterm(action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` on SIGTERM, so ``kill`` stops as cleanly as Ctrl-C (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        action()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt() -> None:
    raise KeyboardInterrupt


def _serve_banner(args: argparse.Namespace, url: str, tokens: FirstStartTokens | None) -> None:
    """What ``serve`` says when it starts; the credentials only on a new database."""
    db = args.db if args.db == ":memory:" else str(Path(args.db).resolve())
    _say(f"{PROG}: provider listening on {url} (database: {db})")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        _say(
            f"warning: listening on {args.host} over plain HTTP: credentials and decisions "
            "cross the network unencrypted; put TLS in front of it",
            stream=sys.stderr,
        )
    if tokens is not None:
        # The one deliberate print of the credentials: they are stored only as hashes.
        _say()
        _say("First start: these credentials are shown once and stored only as hashes.")
        _say(f"  instance credential (the adapter's {ENV_CREDENTIAL}): {tokens.instance}")
        _say(f"  reviewer URL (open it in a browser): {url}/?token={tokens.reviewer}")
        _say(f"  reviewer token (the CLI's {ENV_REVIEWER_TOKEN}): {tokens.reviewer}")
    else:
        _say(
            "The credentials were printed when this database was first started "
            "(they are stored only as hashes)."
        )
    _say()
    _say("Press Ctrl-C to stop.")


def cmd_serve(args: argparse.Namespace) -> int:
    """``serve``: run the provider in the foreground until Ctrl-C."""
    from approval_guard.provider import ProviderServer

    try:
        server = ProviderServer(db=args.db, host=args.host, port=args.port)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    except sqlite3.Error as exc:
        raise CliError(f"cannot open the database {args.db}: {exc}") from None
    server.start()
    stop = threading.Event()
    try:
        with _on_sigterm(stop.set):
            _serve_banner(args, server.url, server.first_start_tokens)
            while not stop.wait(0.5):
                pass
    except KeyboardInterrupt:  # wherever Ctrl-C lands after the start, it means "stop"
        pass
    finally:
        server.stop()
    _say(f"{PROG}: provider stopped")
    return 0


# ----------------------------------------------------------------------------- demo


def _refund_example_path() -> Path:
    """Where ``examples/refund_tool.py`` is: in the installed package, or in a checkout."""
    package_dir = Path(__file__).resolve().parents[1]
    shipped = package_dir / "examples" / "refund_tool.py"  # the wheel's copy
    if shipped.is_file():
        return shipped
    checkout = package_dir.parent
    in_checkout = checkout / "examples" / "refund_tool.py"
    if in_checkout.is_file() and (checkout / "pyproject.toml").is_file():
        return in_checkout
    raise CliError("cannot find examples/refund_tool.py; reinstall approval-guard")


def load_refund_example() -> ModuleType:
    """Import ``examples/refund_tool.py`` (it is not a package module) by its path."""
    path = _refund_example_path()
    spec = importlib.util.spec_from_file_location("approval_guard_demo_refund_tool", path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cli_command() -> str:
    """How to run this CLI from the user's shell, as exactly as we can tell."""
    if shutil.which(PROG):
        return PROG
    if Path(sys.argv[0]).name == PROG:  # e.g. `.venv/bin/approval-guard demo`, not on PATH
        return sys.argv[0]
    return f"{sys.executable} -m approval_guard"


class _LiveLine:
    """One status line: rewritten in place on a terminal, printed every few seconds otherwise."""

    def __init__(self, stream: TextIO, *, every: float = 5.0) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._every = 1.0 if self._tty else every
        self._last = -float("inf")
        self._width = 0

    def update(self, text: str) -> None:
        """Show ``text``, unless the line was shown less than an interval ago."""
        now = time.monotonic()
        if now - self._last < self._every:
            return
        self._last = now
        if self._tty:
            self._stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def clear(self) -> None:
        """Erase the line (on a terminal) so that ordinary output can follow."""
        self._last = time.monotonic()  # and do not redraw it straight away
        if self._tty and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0


def _find_demo_request(
    client: ReviewerClient, finished: threading.Event, *, within: float = 15.0
) -> _wire.ApprovalRequest:
    """The request the guarded call created, as soon as the provider has it."""
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        pending = client.list_requests(_wire.PENDING)
        if pending:
            return pending[0]
        if finished.wait(0.05):
            break
    raise CliError("the guarded call did not create an approval request")


def cmd_demo(args: argparse.Namespace) -> int:
    """``demo``: a temporary provider, the guarded refund, a person's decision, the outcome."""
    import approval_guard as ag
    from approval_guard.provider import ProviderServer

    module = load_refund_example()
    with tempfile.TemporaryDirectory(prefix="approval-guard-demo-") as folder:
        try:
            server = ProviderServer(db=str(Path(folder) / "approvals.sqlite3"), port=args.port)
            server.start()
        except OSError as exc:
            raise CliError(f"cannot start the demo provider: {exc.strerror or exc}") from None
        try:
            tokens = server.first_start_tokens
            if tokens is None:
                raise CliError("the demo provider did not generate credentials")
            guard = ag.Guard(base_url=server.url, credential=tokens.instance)
            issue_refund = module.build(guard)
            reviewer = ReviewerClient(server.url, tokens.reviewer)
            try:
                with _on_sigterm(_interrupt):
                    return _run_demo(args, ag, issue_refund, reviewer, server.url, tokens.reviewer)
            finally:
                reviewer.close()
        finally:
            server.stop()


def _run_demo(
    args: argparse.Namespace,
    ag: ModuleType,
    issue_refund: Callable[..., Any],
    reviewer: ReviewerClient,
    url: str,
    reviewer_token: str,
) -> int:
    out = sys.stdout
    abandon = threading.Event()
    # An Event, not Thread.join(): a join interrupted by Ctrl-C can lose track of the thread.
    finished = threading.Event()
    outcome: dict[str, Any] = {}

    def agent() -> None:
        # The harness side: one tool call that may wait up to 35 minutes, and may be abandoned.
        try:
            with ag.harness_call(
                idempotency_key=f"demo-{uuid.uuid4()}", limit="35m", abandon=abandon
            ):
                outcome["value"] = issue_refund(**DEMO_ARGUMENTS)
        except BaseException as exc:  # reported below; a thread must not die silently
            outcome["error"] = exc
        finally:
            finished.set()

    call = ", ".join(f"{k}={v!r}" for k, v in DEMO_ARGUMENTS.items())
    _say(f"{PROG} demo: a temporary provider is running at {url}")
    _say(f"The agent calls issue_refund({call}); the refund runs only if a person approves it.")
    worker = threading.Thread(target=agent, name="approval-guard-demo-agent", daemon=True)
    worker.start()
    try:
        request = _find_demo_request(reviewer, finished)
        command = _cli_command()
        connection = f"--url {url} --token {reviewer_token}"
        # The demo's tokens are throwaway: its provider and database vanish when it ends.
        _say()
        _say(f"Approval request {request.id} is waiting. Decide it:")
        _say(f"  in a browser:     {url}/?token={reviewer_token}")
        _say(f"  from a terminal:  {command} approve {request.id} {connection}")
        _say(
            f'               or:  {command} deny {request.id} --note "Not a duplicate" {connection}'
        )
        if args.decide:
            _say(
                f"(--decide {args.decide}: deciding by itself in "
                f"{_duration.format_duration(args.after)})"
            )
        _say()

        live = _LiveLine(out)
        decide_at = time.monotonic() + args.after if args.decide else None
        while not finished.is_set():
            live.update(
                f"waiting for a decision on {request.id}: {_time_left(request.deadline_at)}"
            )
            if decide_at is not None and time.monotonic() >= decide_at:
                decide_at = None
                live.clear()
                _auto_decide(reviewer, request.id, args.decide)
            finished.wait(0.1)
        live.clear()
    except KeyboardInterrupt:
        _say()
        _say("Interrupted: withdrawing the approval request…")
        abandon.set()
        finished.wait(15)
        _print_outcome(ag, outcome)
        return 1
    except CliError:
        abandon.set()
        finished.wait(15)
        raise
    return _print_outcome(ag, outcome)


def _auto_decide(reviewer: ReviewerClient, request_id: str, decide: str) -> None:
    if decide == "approve":
        reviewer.decide(
            request_id,
            _wire.APPROVED,
            note=f"Approved automatically by `{PROG} demo --decide approve`.",
            valid_for="5m",
        )
        _say(f"(--decide approve: approved {request_id})")
    else:
        reviewer.decide(
            request_id,
            _wire.DENIED,
            note=f"Denied automatically by `{PROG} demo --decide deny`: the payment is not a "
            "duplicate.",
        )
        _say(f"(--decide deny: denied {request_id})")


def _print_outcome(ag: ModuleType, outcome: dict[str, Any]) -> int:
    """Print what happened to the call; 0 if it ran or a person denied it, 1 otherwise."""
    if "error" in outcome:
        exc = outcome["error"]
        _say(f"Outcome: the demo failed: {type(exc).__name__}: {exc}")
        return 1
    if "value" not in outcome:
        _say("Outcome: unknown; the guarded call did not finish")
        return 1
    value = outcome["value"]
    if isinstance(value, ag.NotRun):
        _say(f"Outcome: issue_refund did not run (reason: {value.reason}).")
        _say(f"  {_safe(value.message)}")
        return 0 if value.reason == ag.Reason.DENIED else 1
    _say("Outcome: approved, and issue_refund ran. It returned:")
    _say(_pretty_json(value, indent="  "))
    return 0


# ----------------------------------------------------------------------------- parser


def _duration_arg(text: str) -> float:
    """``--after``: any canonical duration, ``0s`` included."""
    try:
        return float(_duration.parse_duration_string(text.strip()))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _valid_for_arg(text: str) -> str:
    """``--valid-for``: a positive duration, sent in canonical form."""
    try:
        return _duration.canonical(text.strip(), name="--valid-for")
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _url_arg(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r}")
    return text.rstrip("/")


def build_parser(environ: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; environment defaults are read from ``environ`` now, at call time."""
    env = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run the local approval provider, review requests, or run the demo.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument(
        "--url",
        type=_url_arg,
        default=env.get(ENV_URL, DEFAULT_URL),
        help=f"the provider (default: ${ENV_URL} or {DEFAULT_URL})",
    )
    reviewer = argparse.ArgumentParser(add_help=False, parents=[connection])
    reviewer.add_argument(
        "--token",
        default=env.get(ENV_REVIEWER_TOKEN),
        help=f"a reviewer credential (default: ${ENV_REVIEWER_TOKEN})",
    )

    serve = sub.add_parser("serve", help="run the provider in the foreground")
    serve.add_argument(
        "--db", default="approvals.sqlite3", help="SQLite file (default: approvals.sqlite3)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port (default: {DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.set_defaults(func=cmd_serve)

    list_ = sub.add_parser("list", parents=[reviewer], help="list requests, newest first")
    list_.add_argument("--status", choices=_wire.STATUSES, help="only requests with this status")
    list_.add_argument("--json", action="store_true", help="print the requests as JSON")
    list_.set_defaults(func=cmd_list)

    show = sub.add_parser("show", parents=[reviewer], help="one request with its history")
    show.add_argument("id", help="the request id")
    show.set_defaults(func=cmd_show)

    approve = sub.add_parser("approve", parents=[reviewer], help="approve a pending request")
    approve.add_argument("id", help="the request id")
    approve.add_argument("--note", help="why (the agent sees it)")
    approve.add_argument(
        "--valid-for",
        type=_valid_for_arg,
        default="5m",
        help="how long the call may wait to start (default: 5m)",
    )
    approve.set_defaults(func=cmd_approve)

    deny = sub.add_parser("deny", parents=[reviewer], help="deny a pending request")
    deny.add_argument("id", help="the request id")
    deny.add_argument("--note", required=True, help="why not (the agent receives it)")
    deny.set_defaults(func=cmd_deny)

    cancel = sub.add_parser(
        "cancel",
        parents=[connection],
        help="withdraw a pending request (needs the instance credential that created it)",
    )
    cancel.add_argument("id", help="the request id")
    cancel.add_argument("--reason", help="why it is withdrawn")
    cancel.add_argument(
        "--credential",
        default=env.get(ENV_CREDENTIAL),
        help=f"the instance credential that created the request (default: ${ENV_CREDENTIAL})",
    )
    cancel.set_defaults(func=cmd_cancel)

    demo = sub.add_parser(
        "demo", help="run a guarded refund through a temporary provider and wait for a decision"
    )
    demo.add_argument(
        "--decide",
        choices=("approve", "deny"),
        help="decide by itself after --after, for a non-interactive run",
    )
    demo.add_argument(
        "--after", type=_duration_arg, default=2.0, help="delay before --decide acts (default: 2s)"
    )
    demo.add_argument("--port", type=int, default=0, help="port (default: 0, a free one)")
    demo.set_defaults(func=cmd_demo)

    if importlib.util.find_spec("approval_guard._ledger_cli") is not None:
        ledger_cli = importlib.import_module("approval_guard._ledger_cli")
        ledger_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``approval-guard`` command; return its exit code (0 ok, 1 failure, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): a code, not an exception
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    handler: Handler | None = getattr(args, "func", None)
    if handler is None:
        parser.print_usage(sys.stderr)
        return 2
    try:
        return handler(args)
    except CliError as exc:
        _say(f"{PROG}: error: {exc}", stream=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _say(f"{PROG}: interrupted", stream=sys.stderr)
        return 1
