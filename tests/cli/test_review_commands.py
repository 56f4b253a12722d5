"""The reviewer's commands (list, show, approve, deny, cancel): what they print and send,
and each error in one clear line, against a real local provider over real HTTP.
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import approval_guard as ag
from approval_guard import _env
from approval_guard._codec.duration import format_time_left
from approval_guard._codec.wire import parse_timestamp
from approval_guard.cli import main
from approval_guard.cli._output import LiveLine
from approval_guard.testing import LocalProvider
from tests.support.api import create_from_text
from tests.support.cli import create, free_port, read, run
from tests.support.serving import BurstServer, serve_in_thread


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
        ('currency="EUR"', "400"),
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


def create_raw(provider: LocalProvider, arguments_json: str, *, tool: str = "transfer") -> str:
    """Create a request from JSON text (numbers Python cannot write); return its id."""
    body = f'{{"tool":{json.dumps(tool)},"arguments":{arguments_json},"timeout":"30m"}}'
    request_id = create_from_text(provider, body)
    return request_id


def run_merged(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, *argv: str
) -> tuple[int, str]:
    """``approval-guard ARGV`` in-process as the reviewer; (exit code, stdout + stderr)."""
    code = main([*argv, "--url", provider.url, "--token", provider.reviewer_credential])
    out, err = capsys.readouterr()
    return code, out + err


ODD_NUMBERS = (
    '{"huge":1e400,"minus_zero":-0,"big":9007199254740993,"upper":1E5,"long":' + ("7" * 700) + "}"
)


def nested_arguments(depth: int) -> str:
    """An arguments object nesting ``depth`` levels in all (the object itself is level 1)."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


# Found in the adversarial review of the local provider, its CLI and what it shows.
def test_list_json_prints_exact_numbers_in_ascii(
    provider: LocalProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list --json`` writes numbers as stored (no crash on 1e400) and hidden text as escapes."""
    request_id = create_raw(provider, ODD_NUMBERS, tool="pay\u202eusd")

    code, out = run_merged(capsys, provider, "list", "--json")

    assert 0 == code, out
    assert out.isascii()
    for text in (
        '"huge": 1e400',
        '"minus_zero": -0',
        '"big": 9007199254740993',
        '"upper": 1E5',
        '"long": ' + "7" * 700,
        '"tool": "pay\\u202eusd"',
    ):
        assert text in out
    assert [request_id] == [item["id"] for item in json.loads(out)]


# Found in the adversarial review of the local provider, its CLI and what it shows.
@pytest.mark.parametrize("command", ["list", "show"])
def test_the_cli_reads_arguments_as_deep_as_the_provider_accepts(
    provider: LocalProvider, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A request nested to the provider's limit does not make list or show unreadable."""
    from approval_guard._codec.exact_json import MAX_JSON_DEPTH

    request_id = create_raw(provider, nested_arguments(MAX_JSON_DEPTH))
    argv = ["list"] if command == "list" else ["show", request_id]

    code, out = run_merged(capsys, provider, *argv)

    assert 0 == code, out
    assert request_id in out


# Found in the adversarial review of the local provider, its CLI and what it shows.
@pytest.mark.slow
def test_list_shows_an_old_pending_request_behind_a_full_page_of_newer_ones(
    provider: LocalProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list`` follows the provider's pages: 1,000 newer requests do not hide an old one."""
    old = create_raw(provider, '{"payment_id":"p_old"}', tool="issue_refund")
    store = provider.store
    owner = store.authenticate(provider.credential)
    assert owner is not None
    for i in range(1000):
        store.create_request(
            owner=owner,
            idempotency_key=f"bulk-{i}",
            tool="noop",
            arguments={"i": i},
            timeout_seconds=1800,
        )

    code, out = run_merged(capsys, provider, "list", "--status", "pending")

    assert 0 == code, out
    assert old in out
    assert 1001 == sum(1 for line in out.splitlines() if " pending " in line)


# Found in the adversarial review of the local provider, its CLI and what it shows.
def test_list_ends_when_a_hostile_provider_cursor_loops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A provider answering the same page with ever new cursors does not hang ``list``."""
    from http.server import BaseHTTPRequestHandler

    page = {
        "requests": [
            {
                "id": "r1",
                "tool": "noop",
                "arguments": {},
                "timeout": "30m",
                "status": "pending",
                "created_at": "2026-09-16T12:00:00Z",
                "deadline_at": "2099-09-16T12:30:00Z",
            }
        ],
    }
    calls: list[str] = []

    class Looping(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            calls.append(self.path)
            # The cursor alternates, so it never repeats the one just sent; after
            # 50 pages it stops, so that a CLI without the guard still ends.
            answer = {**page, "next_before": f"c{len(calls) % 2}"} if len(calls) < 50 else {}
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = BurstServer(("127.0.0.1", 0), Looping)
    serve_in_thread(server)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code = main(["list", "--url", url, "--token", "agr_x"])
    finally:
        server.shutdown()
        server.server_close()
    out, err = capsys.readouterr()

    assert 0 == code, err
    assert 1 == out.count("r1")
    assert 2 == len(calls)
