"""The ``approval-guard`` command line, against a real local provider over real HTTP."""

from __future__ import annotations

import ast
import importlib
import io
import json
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

import approval_guard as ag
from approval_guard import _env
from approval_guard._codec.duration import format_time_left
from approval_guard._codec.wire import parse_timestamp
from approval_guard.cli import main
from approval_guard.cli._demo import load_refund_example
from approval_guard.cli._output import LiveLine
from approval_guard.testing import LocalProvider
from tests.support.api import create_from_text
from tests.support.cli import ENV_NAMES, cli, create, free_port, read, run, subprocess_env
from tests.support.paths import REPO


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own APPROVAL_GUARD_* variables must not leak into these tests."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


# ----------------------------------------------------------------------------- list / show


def test_list_shows_requests_newest_first(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``list`` prints one row per request, the newest first, with tool and arguments."""
    older = create(provider, tool="delete_user", arguments={"user_id": "u_1"})
    newer = create(provider, tool="issue_refund")

    code, out, err = run(capsys, provider, "list")

    assert (0, "") == (code, err)
    assert out.index(newer) < out.index(older)
    assert "delete_user" in out
    assert '"user_id":"u_1"' in out
    assert "left" in out  # pending rows show the time left


def test_list_status_filter_shows_only_that_status(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``list --status pending`` leaves out a request that was already denied."""
    denied = create(provider)
    provider.deny(denied, "no")
    pending = create(provider)

    code, out, _ = run(capsys, provider, "list", "--status", "pending")

    assert 0 == code
    assert pending in out
    assert denied not in out


def test_list_json_prints_wire_objects(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``list --json`` prints the API's request objects, for scripts."""
    request_id = create(provider)

    code, out, _ = run(capsys, provider, "list", "--json")

    assert 0 == code
    [item] = json.loads(out)
    assert (request_id, "pending") == (item["id"], item["status"])


def test_list_says_when_there_is_nothing(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """An empty provider gives a sentence, not an empty table."""
    assert (0, "no pending requests\n", "") == run(capsys, provider, "list", "--status", "pending")


def test_show_prints_arguments_and_history(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``show ID`` prints the pretty arguments, the decision and the audit trail."""
    request_id = create(provider, arguments={"payment_id": "payment_9", "amount": 100})
    provider.deny(request_id, "Not a duplicate charge.")

    code, out, _ = run(capsys, provider, "show", request_id)

    assert 0 == code
    assert '\n    "payment_id": "payment_9"' in out  # pretty-printed, indented
    assert "Not a duplicate charge." in out
    history = out.split("history", 1)[1]
    assert "created" in history
    assert "decided" in history


def test_output_escapes_terminal_control_characters(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """Hostile arguments cannot send escape sequences to the reviewer's terminal."""
    request_id = create(provider, arguments={"memo": "a\u009b2Jb \u202eevil"})

    for command in (["list"], ["show", request_id]):
        code, out, _ = run(capsys, provider, *command)
        assert 0 == code
        assert "\u009b" not in out
        assert "\u202e" not in out
        assert "\\u009b2Jb" in out


# ----------------------------------------------------------------------------- decisions


def test_approve_records_approval_valid_for_the_given_time(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``approve --valid-for 10m`` approves with expires_at ten minutes after the decision."""
    request_id = create(provider)

    code, out, _ = run(
        capsys, provider, "approve", request_id, "--valid-for", "10m", "--note", "ok"
    )

    assert 0 == code
    assert f"approved {request_id}" in out
    state = read(provider, request_id)
    decision = state["decision"]
    assert ("approved", "ok") == (state["status"], decision["note"])
    decided = parse_timestamp(decision["decided_at"], field="decided_at")
    expires = parse_timestamp(decision["expires_at"], field="expires_at")
    assert 600 == (expires - decided).total_seconds()


def test_approve_lets_a_waiting_guarded_call_run(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A guarded call blocked on approval returns the tool's result once the CLI approves."""
    guard = ag.Guard(base_url=provider.url, credential=provider.credential, poll_wait="5s")

    @guard.requires_approval(timeout="5m")
    def issue_refund(payment_id: str, amount: int) -> dict[str, Any]:
        return {"payment_id": payment_id, "amount": amount, "status": "refunded"}

    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(issue_refund("payment_1", 500)))
    worker.start()
    request = provider.next_request(timeout=5.0)

    code, _, _ = run(capsys, provider, "approve", request.id)
    worker.join(timeout=15)

    assert 0 == code
    assert [{"payment_id": "payment_1", "amount": 500, "status": "refunded"}] == results


def test_deny_with_note_reaches_the_waiting_call_as_not_run(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``deny --note`` makes the waiting guarded call return NotRun(DENIED) with that note."""
    guard = ag.Guard(base_url=provider.url, credential=provider.credential, poll_wait="5s")
    ran: list[bool] = []

    @guard.requires_approval(timeout="5m")
    def delete_user(user_id: str) -> None:
        ran.append(True)

    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(delete_user("u_1")))
    worker.start()
    request = provider.next_request(timeout=5.0)

    code, out, _ = run(capsys, provider, "deny", request.id, "--note", "Ask the account owner.")
    worker.join(timeout=15)

    assert (0, f"denied {request.id} (delete_user)\n") == (code, out)
    [outcome] = results
    assert isinstance(outcome, ag.NotRun)
    assert (ag.Reason.DENIED, "Ask the account owner.") == (outcome.reason, outcome.note)
    assert [] == ran


def test_deny_without_note_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``deny`` needs a note: argparse refuses it with exit code 2 and changes nothing."""
    request_id = create(provider)

    code, _, err = run(capsys, provider, "deny", request_id)

    assert 2 == code
    assert "--note" in err
    assert "pending" == read(provider, request_id)["status"]


def test_deciding_twice_says_the_request_is_no_longer_pending(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A second decision fails with one line naming the request's current status."""
    request_id = create(provider)
    provider.approve(request_id)

    code, _, err = run(capsys, provider, "deny", request_id, "--note", "too late")

    assert 1 == code
    assert (
        f"approval-guard: error: request {request_id} is no longer pending: it is approved\n" == err
    )


def test_cancel_with_the_instance_credential_withdraws_the_request(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``cancel --credential`` (the creating instance's) makes a pending request cancelled."""
    request_id = create(provider)

    code = main(["cancel", request_id, "--url", provider.url, "--credential", provider.credential])
    out, _ = capsys.readouterr()

    assert 0 == code
    assert f"cancelled {request_id}" in out
    assert "cancelled" == read(provider, request_id)["status"]


def test_cancel_reads_the_credential_from_the_environment(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """APPROVAL_GUARD_URL and APPROVAL_GUARD_CREDENTIAL stand in for --url and --credential."""
    request_id = create(provider)
    monkeypatch.setenv(_env.ENV_URL, provider.url)
    monkeypatch.setenv(_env.ENV_CREDENTIAL, provider.credential)

    assert 0 == main(["cancel", request_id])
    assert "cancelled" == read(provider, request_id)["status"]


def test_cancel_without_an_instance_credential_explains_what_it_needs(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """Without --credential, cancel fails with a hint instead of sending anything."""
    request_id = create(provider)

    code = main(["cancel", request_id, "--url", provider.url])
    _, err = capsys.readouterr()

    assert 1 == code
    assert "instance credential" in err
    assert "pending" == read(provider, request_id)["status"]


def test_reviewer_commands_read_url_and_token_from_the_environment(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """APPROVAL_GUARD_URL and APPROVAL_GUARD_REVIEWER_TOKEN stand in for --url and --token."""
    request_id = create(provider)
    monkeypatch.setenv(_env.ENV_URL, provider.url)
    monkeypatch.setenv(_env.ENV_REVIEWER_TOKEN, provider.reviewer_credential)

    code, out, _ = run(capsys, None, "list")

    assert 0 == code
    assert request_id in out


# ----------------------------------------------------------------------------- errors


def test_wrong_token_is_one_clear_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A refused credential says 401 in one line, and never echoes the token."""
    code = main(["list", "--url", provider.url, "--token", "agr_wrong_token_xyz"])
    out, err = capsys.readouterr()

    assert (1, "") == (code, out)
    assert 1 == err.count("\n")
    assert "401" in err
    assert "agr_wrong_token_xyz" not in err


def test_instance_credential_cannot_approve(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """Approving with an instance credential is refused (403) and the request stays pending."""
    request_id = create(provider)

    code = main(["approve", request_id, "--url", provider.url, "--token", provider.credential])
    _, err = capsys.readouterr()

    assert 1 == code
    assert "403" in err
    assert "pending" == read(provider, request_id)["status"]


@pytest.mark.parametrize("command", [["show"], ["approve"], ["deny", "--note", "x"]])
def test_unknown_id_is_one_clear_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, command: list[str]
) -> None:
    """An id the provider does not know gives 'no request with id ...' and exit code 1."""
    missing = str(uuid.uuid4())
    code, _, err = run(capsys, provider, command[0], missing, *command[1:])

    assert 1 == code
    assert (
        f"approval-guard: error: no request with id {missing} at {provider.url} (404 not found)\n"
        == err
    )


def test_no_provider_running_says_how_to_start_one(capsys: pytest.CaptureFixture[str]) -> None:
    """Connection refused becomes 'no provider is answering at URL; start one with serve'."""
    url = f"http://127.0.0.1:{free_port()}"

    code = main(["list", "--url", url, "--token", "agr_anything"])
    _, err = capsys.readouterr()

    assert 1 == code
    expected = (
        f"approval-guard: error: no provider is answering at {url}; "
        "start one with `approval-guard serve`\n"
    )
    assert expected == err


def test_missing_token_explains_where_to_get_one(capsys: pytest.CaptureFixture[str]) -> None:
    """A reviewer command with no token fails before any request, naming the variable."""
    code = main(["list", "--url", "http://127.0.0.1:9"])
    _, err = capsys.readouterr()

    assert 1 == code
    assert _env.ENV_REVIEWER_TOKEN in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["list", "--status", "maybe"],
        ["approve", "x", "--valid-for", "soon"],
        ["demo", "--after", "2 seconds"],
        ["list", "--url", "ftp://example.com"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Bad command lines are argparse's business: a usage message and exit code 2."""
    assert 2 == main(argv)
    assert "usage: approval-guard" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` is a success and lists the subcommands."""
    assert 0 == main(["--help"])
    out = capsys.readouterr().out
    for command in ("serve", "list", "show", "approve", "deny", "cancel", "demo"):
        assert command in out


# ----------------------------------------------------------------------------- subprocesses


def test_python_dash_m_runs_the_same_cli(provider: LocalProvider) -> None:
    """``python -m approval_guard list`` works in a child process."""
    request_id = create(provider)

    done = cli("list", "--url", provider.url, "--token", provider.reviewer_credential)

    assert (0, "") == (done.returncode, done.stderr)
    assert request_id in done.stdout


def test_python_dash_m_reports_a_missing_provider_with_exit_1() -> None:
    """The child process exits 1 with the one-line hint when nothing listens."""
    url = f"http://127.0.0.1:{free_port()}"

    done = cli("list", "--url", url, "--token", "agr_x")

    assert 1 == done.returncode
    assert f"no provider is answering at {url}" in done.stderr


def _serve(db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "approval_guard", "serve", "--db", str(db), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )


def _read_until(process: subprocess.Popen[str], marker: str) -> str:
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            break
    return "".join(lines)


def _stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=15)
    return process.returncode, out


def test_serve_prints_credentials_on_first_start_only(tmp_path: Path) -> None:
    """First start prints URL, instance credential and reviewer URL; a restart does not."""
    db = tmp_path / "approvals.sqlite3"

    first = _serve(db)
    try:
        banner = _read_until(first, "Ctrl-C")
        url = banner.split("listening on ", 1)[1].split()[0]
        reviewer = banner.split(f"{url}/?token=", 1)[1].split()[0]
        instance = banner.split("APPROVAL_GUARD_CREDENTIAL): ", 1)[1].split()[0]
        # The printed credentials work: the instance creates, the reviewer lists.
        response = requests.post(
            f"{url}/v1/requests",
            json={"tool": "t", "arguments": {}, "timeout": "1m"},
            headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": "k1"},
            timeout=5,
        )
        assert 201 == response.status_code
        listed = cli("list", "--url", url, "--token", reviewer)
        assert response.json()["id"] in listed.stdout
    finally:
        code, rest = _stop(first)
    assert 0 == code
    assert "provider stopped" in rest

    second = _serve(db)
    try:
        banner = _read_until(second, "Ctrl-C")
    finally:
        code, _ = _stop(second)
    assert 0 == code
    assert "printed when this database was first started" in banner
    assert reviewer not in banner
    assert instance not in banner


def test_serve_on_a_busy_port_fails_with_exit_1(tmp_path: Path) -> None:
    """A port already in use is a one-line error, not a traceback."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = cli("serve", "--db", str(tmp_path / "a.sqlite3"), "--port", str(port))

    assert 1 == done.returncode
    assert "cannot listen on 127.0.0.1" in done.stderr
    assert "Traceback" not in done.stderr


# ----------------------------------------------------------------------------- demo


def test_demo_decide_approve_runs_the_refund() -> None:
    """``demo --decide approve --after 1s`` ends with the refund's result and exit code 0."""
    done = cli("demo", "--decide", "approve", "--after", "1s")

    assert 0 == done.returncode, done.stdout + done.stderr
    assert "/?token=agr_" in done.stdout  # where to approve in a browser
    assert "approve " in done.stdout and "--token agr_" in done.stdout  # the CLI command
    assert "waiting for a decision on" in done.stdout  # the live line
    outcome = done.stdout.split("Outcome: approved, and issue_refund ran. It returned:", 1)[1]
    refund = json.loads(outcome)
    assert {
        "payment_id": "payment_123",
        "amount": 4900,
        "currency": "GBP",
        "status": "refunded",
    } == {k: refund[k] for k in ("payment_id", "amount", "currency", "status")}
    assert refund["refund_id"].startswith("re_")


def test_demo_decide_deny_ends_with_reason_denied() -> None:
    """``demo --decide deny`` reports the call did not run, reason denied, and exits 0."""
    done = cli("demo", "--decide", "deny", "--after", "0s")

    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Outcome: issue_refund did not run (reason: denied)." in done.stdout
    assert "the payment is not a duplicate" in done.stdout
    assert "refund_id" not in done.stdout


def test_refund_example_loads_from_the_checkout() -> None:
    """The demo finds examples/refund_tool.py and its build() guards issue_refund."""
    module = load_refund_example()

    assert Path(module.__file__ or "").name == "refund_tool.py"
    assert callable(module.build)


@pytest.mark.parametrize("command", ["list", "show", "approve"])
def test_a_netrc_entry_for_the_provider_never_replaces_the_reviewer_token(
    capsys: pytest.CaptureFixture[str],
    provider: LocalProvider,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
) -> None:
    """With ~/.netrc naming the provider's host, the CLI still sends its Bearer token."""
    request_id = create(provider)  # before HOME moves: this helper is plain requests
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password netrc-secret-123\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("NETRC", raising=False)

    argv = [command] if command == "list" else [command, request_id]

    code, out, err = run(capsys, provider, *argv)

    assert (0, "") == (code, err)
    assert "netrc-secret-123" not in out
    assert ("approved" if command == "approve" else "pending") == provider.get(request_id).status


@pytest.mark.parametrize("command", ["list", "show"])
def test_the_cli_shows_numbers_exactly_and_hidden_characters_escaped(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, command: str
) -> None:
    """Numbers as sent (never through a float) and bidi/zero-width characters escaped."""
    raw = (
        b'{"tool":"issue_refund","timeout":"30m","arguments":'
        b'{"b":9007199254740993,"h":1e400,"t":"a\xe2\x80\xaeb\xe2\x80\x8b"}}'
    )
    request_id = create_from_text(provider, raw)
    argv = [command] if command == "list" else [command, request_id]

    code, out, err = run(capsys, provider, *argv)

    assert (0, "") == (code, err)
    assert "9007199254740993" in out
    assert "1e400" in out and "Infinity" not in out and "inf" not in out.lower().split()
    assert "a\\u202eb\\u200b" in out
    assert "\u202e" not in out and "\u200b" not in out


# ----------------------------------------------------------------------------- the package's shape

# What a second HTTP client would import; the CLI sends only through ``_client.ProviderClient``.
HTTP_MODULES = {"requests", "urllib3", "httpx", "aiohttp", "http", "urllib.request", "socket"}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "path", sorted((REPO / "approval_guard" / "cli").glob("*.py")), ids=lambda p: p.name
)
def test_the_cli_has_no_http_client_of_its_own(path: Path) -> None:
    """No CLI module imports an HTTP library: every exchange goes through the library's client."""
    imported = _imported_modules(path)

    assert set() == {
        name
        for name in imported
        for http in HTTP_MODULES
        if name == http or name.startswith(f"{http}.")
    }


def test_the_console_script_runs_the_cli_main() -> None:
    """The approval-guard script names approval_guard.cli:main."""
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    module_name, _, attribute = scripts["approval-guard"].partition(":")

    assert main is getattr(importlib.import_module(module_name), attribute)


@pytest.mark.parametrize(
    ("expected", "seconds"),
    [
        ("29m 54s left", 1794.9),
        ("1h 01m 01s left", 3661),
        ("59s left", 59.99),
        ("1s left", 1),
        ("deadline passed", 0.99),
        ("deadline passed", 0),
        ("deadline passed", -30),
    ],
)
def test_time_left_counts_down_in_whole_seconds(expected: str, seconds: float) -> None:
    """The time left reads "29m 54s left", cut to whole seconds, then "deadline passed"."""
    assert expected == format_time_left(seconds)


def test_the_live_line_off_a_terminal_prints_at_most_once_an_interval() -> None:
    """Off a terminal the status line is printed as lines, no more often than every interval."""
    now = [0.0]
    stream = io.StringIO()
    live = LiveLine(stream, every=5.0, monotonic=lambda: now[0])

    for moment, text in [(0.0, "a"), (4.9, "b"), (5.0, "c"), (6.0, "d"), (10.0, "e")]:
        now[0] = moment
        live.update(text)

    assert ["a", "c", "e"] == stream.getvalue().splitlines()


def _create_editable(provider: LocalProvider) -> str:
    raw = (
        b'{"tool":"issue_refund","timeout":"30m","editable":["amount"],'
        b'"arguments":{"payment_id":"payment_123","amount":4900,"currency":"GBP"}}'
    )
    request_id = create_from_text(provider, raw)
    return request_id


def test_approve_set_changes_an_editable_argument_exactly(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``approve ID --set amount=...`` sends the whole arguments with that edit, numbers exact."""
    request_id = _create_editable(provider)

    code, _, err = run(capsys, provider, "approve", request_id, "--set", "amount=9007199254740993")

    assert (0, "") == (code, err)
    decision = provider.get(request_id).decision
    assert decision is not None and decision.arguments is not None
    assert 9007199254740993 == decision.arguments["amount"]
    assert 4900 == provider.get(request_id).arguments["amount"]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("currency=\"EUR\"", "400"),
        ("nothing=1", "no argument"),
        ("amount=two", "not JSON"),
        ("amount", "NAME=JSON"),
    ],
)
def test_approve_set_refuses_what_cannot_be_an_edit(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, edit: str, said: str
) -> None:
    """A non-editable name, an unknown name, text that is not JSON: one line, exit 1, pending."""
    request_id = _create_editable(provider)

    code, _, err = run(capsys, provider, "approve", request_id, "--set", edit)

    assert 1 == code and said in err, err
    assert "pending" == provider.get(request_id).status
