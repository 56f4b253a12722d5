"""``demo``: a temporary provider, the guarded refund, a person's decision, the outcome."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from types import ModuleType
from typing import Any

from approval_guard._codec import duration as _duration
from approval_guard._codec import wire as _wire
from approval_guard._codec import wire_models as _models
from approval_guard.cli._output import (
    PROG,
    CliError,
    LiveLine,
    logs_above,
    pretty_json,
    safe,
    say,
    time_left,
)
from approval_guard.cli._reviewer_client import ReviewerClient
from approval_guard.cli._signals import interrupt, on_sigterm

#: The demo's refund, as an agent might ask for it.
DEMO_ARGUMENTS: dict[str, Any] = {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}


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


def _find_demo_request(
    client: ReviewerClient, finished: threading.Event, *, within: float = 15.0
) -> _models.ApprovalRequest:
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

    try:
        from approval_guard.provider import ProviderServer
    except ImportError as exc:
        raise CliError(str(exc)) from None

    from approval_guard.cli._serve import _slack

    slack = _slack(args, None)
    module = load_refund_example()
    with tempfile.TemporaryDirectory(prefix="approval-guard-demo-") as folder:
        try:
            server = ProviderServer(
                db=str(Path(folder) / "approvals.sqlite3"), port=args.port, slack=slack
            )
            if slack is not None and getattr(args, "slack_user", None):
                _link_demo_reviewer(server, args.slack_user)
            server.start()
        except OSError as exc:
            raise CliError(f"cannot start the demo provider: {exc.strerror or exc}") from None
        try:
            tokens = server.first_start_tokens
            if tokens is None:
                raise CliError("the demo provider did not generate credentials")
            guard = ag.Guard(base_url=server.url, credential=tokens.instance)
            issue_refund = module.build(guard)
            with (
                closing(ReviewerClient(server.url, tokens.reviewer)) as reviewer,
                on_sigterm(interrupt),
            ):
                code = _run_demo(args, ag, issue_refund, reviewer, server.url, tokens.reviewer)
            _let_the_page_catch_up(server)
            if slack is not None:
                _let_slack_catch_up(server, slack)
            return code
        finally:
            server.shutdown()


#: How long the demo keeps serving, at most, for its Slack message to show the outcome.
SLACK_CATCH_UP_SECONDS = 10.0


def _let_slack_catch_up(server: Any, slack: Any) -> None:
    """Keep serving until the Slack message's last update went out (or could not)."""
    del slack
    give_up = time.monotonic() + SLACK_CATCH_UP_SECONDS
    while (
        time.monotonic() < give_up and server.store.next_outbox_due(channels=("slack",)) is not None
    ):
        time.sleep(0.05)


def _link_demo_reviewer(server: Any, slack_user: str) -> None:
    """``demo --slack-user U...``: that Slack user's clicks decide as the demo's reviewer."""
    from approval_guard.provider.channels.slack.settings import check_slack_user
    from approval_guard.provider.store.sql.credentials import ReviewerNameError

    try:
        server.store.link_identity("reviewer", "slack", check_slack_user(slack_user))
    except ReviewerNameError as exc:
        server.close()
        raise CliError(f"--slack-user: {exc}") from None


#: How long the demo keeps serving, at most, for an open review page to see the end.
PAGE_CATCH_UP_SECONDS = 15.0
FINISHED_NOTICE = (
    "The demo has finished: its provider has stopped, so this page no longer updates. "
    "Run the demo again for a new request."
)


def _let_the_page_catch_up(server: Any) -> None:
    """Keep serving until an open review page has shown the decision and the demo's end.

    Without this the page a person just approved in would at once say
    "Offline": the demo's provider exits with the outcome. Nobody opened the
    page (a terminal decision): nothing to wait for.
    """
    if not server.review_page_opened:
        return
    seq = server.store.seq
    server.notice = FINISHED_NOTICE
    give_up = time.monotonic() + PAGE_CATCH_UP_SECONDS
    try:
        while not server.page_caught_up(seq) and time.monotonic() < give_up:
            time.sleep(0.05)
        # A moment for the last answer to leave before the connections close.
        time.sleep(0.2)
    except KeyboardInterrupt:  # Ctrl-C again: the person does not want to wait
        pass


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
    say(f"{PROG} demo: a temporary provider is running at {url}")
    say(f"The agent calls issue_refund({call}); the refund runs only if a person approves it.")
    worker = threading.Thread(target=agent, name="approval-guard-demo-agent", daemon=True)
    worker.start()
    try:
        request = _find_demo_request(reviewer, finished)
        command = _cli_command()
        connection = f"--url {url} --token {reviewer_token}"
        # The demo's tokens are throwaway: its provider and database vanish when it ends.
        say()
        say(f"Approval request {request.id} is waiting. Decide it:")
        say(f"  in a browser:     {url}/?token={reviewer_token}")
        say(f"  from a terminal:  {command} approve {request.id} {connection}")
        say(
            f'               or:  {command} deny {request.id} --note "Not a duplicate" {connection}'
        )
        say(
            '  (on the page, "Approve, and allow calls like this for …" also gives a standing'
            " grant: the demo then repeats the call, and the grant approves it at once)"
        )
        if args.decide:
            say(
                f"(--decide {args.decide}: deciding by itself in "
                f"{_duration.format_duration(args.after)})"
            )
        say()

        live = LiveLine(out)
        decide_at = time.monotonic() + args.after if args.decide else None
        # The guard logs from the agent's thread ("runs with a reviewer's edit"): each
        # record on a line of its own, never run into the counter.
        with logs_above(live):
            while not finished.is_set():
                left = time_left(request.deadline_at)
                live.update(f"waiting for a decision on {request.id}: {left}")
                if decide_at is not None and time.monotonic() >= decide_at:
                    decide_at = None
                    live.clear()
                    _auto_decide(reviewer, request.id, args.decide)
                finished.wait(0.1)
            live.clear()
    except KeyboardInterrupt:
        say()
        say("Interrupted: withdrawing the approval request…")
        abandon.set()
        finished.wait(15)
        _print_outcome(ag, outcome)
        return 1
    except CliError:
        abandon.set()
        finished.wait(15)
        raise
    code = _print_outcome(ag, outcome)
    if code == 0 and "value" in outcome and not isinstance(outcome["value"], ag.NotRun):
        _repeat_under_grant(ag, issue_refund, reviewer, request.id)
    return code


#: How long the demo's repeated call may take: a grant answers it at once.
REPEAT_LIMIT = "15s"


def _repeat_under_grant(
    ag: ModuleType, issue_refund: Callable[..., Any], reviewer: ReviewerClient, request_id: str
) -> None:
    """The reviewer gave a standing grant with the approval: show the same call covered by it."""
    answer = reviewer.call("GET", "/v1/grants")
    found = answer.get("grants") if isinstance(answer, dict) else None
    grants = [
        one
        for one in (found if isinstance(found, list) else [])
        if isinstance(one, dict)
        and one.get("from_request") == request_id
        and one.get("status") == "live"
    ]
    if not grants:
        return
    grant_id = safe(str(grants[0].get("id")))
    say()
    say(
        f"You gave standing grant {grant_id} with your approval. The agent makes the same call"
        " again: the grant approves it at once, and nobody is asked."
    )
    try:
        with ag.harness_call(idempotency_key=f"demo-{uuid.uuid4()}", limit=REPEAT_LIMIT):
            again = issue_refund(**DEMO_ARGUMENTS)
    except Exception as exc:  # the first outcome stands; say what happened to the repeat
        say(f"Outcome of the repeat: the call failed: {type(exc).__name__}")
        return
    if isinstance(again, ag.NotRun):
        say(f"Outcome of the repeat: issue_refund did not run (reason: {again.reason}).")
        return
    say(f"Outcome of the repeat: approved by grant {grant_id}, and issue_refund ran again.")
    say("The page lists the grant under Standing grants, where you can revoke it.")


def _auto_decide(reviewer: ReviewerClient, request_id: str, decide: str) -> None:
    if decide == "approve":
        reviewer.decide(
            request_id,
            _wire.APPROVED,
            note=f"Approved automatically by `{PROG} demo --decide approve`.",
            valid_for="5m",
        )
        say(f"(--decide approve: approved {request_id})")
    else:
        reviewer.decide(
            request_id,
            _wire.DENIED,
            note=f"Denied automatically by `{PROG} demo --decide deny`: the payment is not a "
            "duplicate.",
        )
        say(f"(--decide deny: denied {request_id})")


def _print_outcome(ag: ModuleType, outcome: dict[str, Any]) -> int:
    """Print what happened to the call; 0 if it ran or a person denied it, 1 otherwise."""
    if "error" in outcome:
        exc = outcome["error"]
        say(f"Outcome: the demo failed: {type(exc).__name__}: {exc}")
        return 1
    if "value" not in outcome:
        say("Outcome: unknown; the guarded call did not finish")
        return 1
    value = outcome["value"]
    if isinstance(value, ag.NotRun):
        say(f"Outcome: issue_refund did not run (reason: {value.reason}).")
        say(f"  {safe(value.message)}")
        return 0 if value.reason == ag.Reason.DENIED else 1
    say("Outcome: approved, and issue_refund ran. It returned:")
    say(pretty_json(value, indent="  "))
    return 0
