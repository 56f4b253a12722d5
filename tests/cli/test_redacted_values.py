"""The CLI and issue 11's redacted values, against a real local provider over real HTTP.

A guard sends a redacted value as the marker ``{"$redacted": "<12 hex>"}``.
The human output shows it as ``\u2039redacted 1a2b3c4d5e6f\u203a``, as the review page
does; ``--json`` keeps it as sent; ``approve --set`` refuses to change it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import requests

from approval_guard._codec.display import markers_at
from approval_guard._codec.exact_json import canonical_json
from approval_guard.testing import LocalProvider
from tests.support.api import create_from_text
from tests.support.cli import cli, run
from tests.support.guards import finish, in_thread, make_guard

MARKER = '{"$redacted": "1a2b3c4d5e6f"}'
SHOWN = "\u2039redacted 1a2b3c4d5e6f\u203a"
REDACTED_REFUND = (
    '{"payment_id": "payment_123", "amount": 4900, "currency": "GBP", '
    f'"api_key": {MARKER}, "card": {{"holder": "A. Person", "number": '
    '{"$redacted": "00ff00ff00ff"}}}'
)


def create(provider: LocalProvider, arguments_json: str, editable: tuple[str, ...] = ()) -> str:
    """Create a request as a guard would, from the arguments' JSON text; its id.

    As a guard does, it lists where its markers are (API 1.3 ``redacted``).
    """
    redacted = markers_at(json.loads(arguments_json))
    body = (
        f'{{"tool": "issue_refund", "timeout": "30m", "arguments": {arguments_json}, '
        f'"editable": {json.dumps(list(editable))}, "redacted": {json.dumps(redacted)}}}'
    )
    return create_from_text(provider, body)


def argv_for(command: str, request_id: str) -> list[str]:
    return [command] if command == "list" else [command, request_id]


# ----------------------------------------------------------------------------- list / show


@pytest.mark.parametrize("command", ["list", "show"])
def test_a_marker_prints_as_redacted_with_its_digest(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, command: str
) -> None:
    """``list`` and ``show`` print the marker as "redacted" and its digest, never as an object."""
    # Short enough for list's 60-character column.
    request_id = create(provider, f'{{"a": {MARKER}, "b": [{{"$redacted": "00ff00ff00ff"}}]}}')

    code, out, err = run(capsys, provider, *argv_for(command, request_id))

    assert (0, "") == (code, err)
    colon = ":" if command == "list" else ": "
    assert f'"a"{colon}{SHOWN}' in out
    assert "\u2039redacted 00ff00ff00ff\u203a" in out
    assert "$redacted" not in out


def test_show_prints_the_arguments_as_the_review_page_shows_them(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``show``'s arguments are, line for line, the page's ``display.arguments``."""
    request_id = create(
        provider,
        '{"api_key": {"$redacted": "1a2b3c4d5e6f"}, "odd": {"$redacted": "1A2B3C4D5E6F"}, '
        '"cards": [{"number": {"$redacted": "00ff00ff00ff"}}], "memo": "a\\u202eb", '
        '"big": 9007199254740993}',
    )
    listed = requests.get(
        f"{provider.url}/v1/requests",
        headers={"Authorization": f"Bearer {provider.reviewer_credential}"},
        timeout=5,
    )
    assert 200 == listed.status_code, listed.text
    (item,) = listed.json()["requests"]
    page_lines = item["display"]["arguments"].splitlines()

    code, out, _ = run(capsys, provider, "show", request_id)

    assert 0 == code
    lines = out.splitlines()
    start = lines.index("arguments") + 1
    assert ["  " + line for line in page_lines] == lines[start : start + len(page_lines)]
    assert "history" == lines[start + len(page_lines)].split(" ")[0]


def test_show_names_the_redacted_paths(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``show`` says which arguments are redacted, as the page's notice does."""
    request_id = create(provider, REDACTED_REFUND, ("amount",))

    code, out, _ = run(capsys, provider, "show", request_id)

    assert 0 == code
    (line,) = [line for line in out.splitlines() if line.startswith("redacted ")]
    assert "api_key, card.number" in line


def test_show_has_no_redacted_line_without_markers(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A request with nothing redacted prints no "redacted" line."""
    request_id = create(provider, '{"payment_id": "p", "amount": 1}')

    code, out, _ = run(capsys, provider, "show", request_id)

    assert 0 == code
    assert [] == [line for line in out.splitlines() if line.startswith("redacted")]


def test_markers_in_a_list_print_redacted_each(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A marker in each item of an array prints redacted in place, with its path named."""
    request_id = create(
        provider,
        '{"cards": [{"number": {"$redacted": "aaaaaaaaaaaa"}}, '
        '{"number": {"$redacted": "bbbbbbbbbbbb"}}]}',
    )

    code, out, _ = run(capsys, provider, "show", request_id)

    assert 0 == code
    assert '"number": \u2039redacted aaaaaaaaaaaa\u203a' in out
    assert '"number": \u2039redacted bbbbbbbbbbbb\u203a' in out
    assert "cards[0].number, cards[1].number" in out


@pytest.mark.parametrize(
    ("value", "compact", "pretty"),
    [
        pytest.param(
            '{"$redacted": "1A2B3C4D5E6F"}',
            '{"$redacted":"1A2B3C4D5E6F"}',
            '"$redacted": "1A2B3C4D5E6F"',
            id="upper-case-hex",
        ),
        pytest.param(
            '{"$redacted": "1a2b3c4d5e6"}',
            '{"$redacted":"1a2b3c4d5e6"}',
            '"$redacted": "1a2b3c4d5e6"',
            id="eleven-digits",
        ),
        pytest.param(
            '{"$redacted": "1a2b3c4d5e6f0"}',
            '{"$redacted":"1a2b3c4d5e6f0"}',
            '"$redacted": "1a2b3c4d5e6f0"',
            id="thirteen-digits",
        ),
        pytest.param(
            '{"$redacted": "1a2b3c4d5e6f", "x": 1}',
            '{"$redacted":"1a2b3c4d5e6f","x":1}',
            '"x": 1',
            id="a-second-key",
        ),
        pytest.param(
            '{"$redacted": 123456789012}',
            '{"$redacted":123456789012}',
            '"$redacted": 123456789012',
            id="a-number",
        ),
        pytest.param(
            '{"$REDACTED": "1a2b3c4d5e6f"}',
            '{"$REDACTED":"1a2b3c4d5e6f"}',
            '"$REDACTED": "1a2b3c4d5e6f"',
            id="another-key",
        ),
        pytest.param(
            '{"$redacted": "1a2b3c4d5e6\\u202e"}',
            '{"$redacted":"1a2b3c4d5e6\\u202e"}',
            '"$redacted": "1a2b3c4d5e6\\u202e"',
            id="a-bidi-override",
        ),
        pytest.param(
            f'"{SHOWN}"',
            f'"{SHOWN}"',
            f'"{SHOWN}"',
            id="a-string-that-looks-shown",
        ),
    ],
)
@pytest.mark.parametrize("command", ["list", "show"])
def test_anything_but_the_exact_marker_prints_as_the_json_it_is(
    capsys: pytest.CaptureFixture[str],
    provider: LocalProvider,
    command: str,
    value: str,
    compact: str,
    pretty: str,
) -> None:
    """Only ``{"$redacted": "<12 lowercase hex>"}`` is a marker; the rest is JSON, escaped."""
    request_id = create(provider, f'{{"k": {value}}}')

    code, out, err = run(capsys, provider, *argv_for(command, request_id))

    assert (0, "") == (code, err)
    assert (compact if command == "list" else pretty) in out
    assert "\u202e" not in out
    if "\u2039" not in value:
        assert "\u2039redacted" not in out
    assert [] == [line for line in out.splitlines() if line.startswith("redacted")]


def test_list_json_keeps_the_marker_as_the_provider_sent_it(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``list --json`` is for scripts: the marker object stays exactly as sent."""
    request_id = create(provider, REDACTED_REFUND, ("amount",))

    code, out, _ = run(capsys, provider, "list", "--json")

    assert 0 == code
    [item] = json.loads(out)
    assert request_id == item["id"]
    assert {"$redacted": "1a2b3c4d5e6f"} == item["arguments"]["api_key"]
    assert {"$redacted": "00ff00ff00ff"} == item["arguments"]["card"]["number"]
    assert "redacted 1a2b3c4d5e6f" not in out
    assert "\\u2039" not in out and "\u2039" not in out


# ----------------------------------------------------------------------------- approve --set


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        pytest.param('api_key="sk_live_guess"', "'api_key' is redacted", id="a-marker"),
        pytest.param(
            'card={"holder": "B", "number": "4242"}', "'card' holds a redacted value", id="nested"
        ),
    ],
)
def test_approve_set_on_a_redacted_value_is_a_usage_error_and_sends_nothing(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, edit: str, said: str
) -> None:
    """``--set`` on a redacted name: one line, exit 2, no decision sent, still pending."""
    request_id = create(provider, REDACTED_REFUND, ("amount",))

    code, out, err = run(
        capsys, provider, "approve", request_id, "--set", edit, "--set", "amount=1"
    )

    assert (2, "") == (code, out)
    assert said in err and "cannot be changed" in err
    assert 1 == len(err.splitlines())
    assert "sk_live_guess" not in err and "4242" not in err
    assert 0 == provider.stats.decisions
    assert "pending" == provider.get(request_id).status


def test_approve_set_on_a_redacted_value_exits_2_from_the_command_line(
    provider: LocalProvider,
) -> None:
    """``python -m approval_guard approve ID --set api_key=...`` exits 2 as a process."""
    request_id = create(provider, REDACTED_REFUND, ("amount",))

    done = cli(
        *("approve", request_id, "--set", 'api_key="x"'),
        *("--url", provider.url, "--token", provider.reviewer_credential),
    )

    assert 2 == done.returncode, done.stderr
    assert "'api_key' is redacted" in done.stderr
    assert 0 == provider.stats.decisions
    assert "pending" == provider.get(request_id).status


def test_a_string_that_looks_redacted_is_no_marker_to_the_edit_check(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A plain string value is not redacted: ``--set`` on it goes to the provider as usual."""
    request_id = create(provider, f'{{"memo": "{SHOWN}", "amount": 1}}', ("memo",))

    code, _, err = run(capsys, provider, "approve", request_id, "--set", 'memo="ok"')

    assert (0, "") == (code, err)
    decision = provider.get(request_id).decision
    assert decision is not None and {"memo": "ok", "amount": 1} == decision.arguments


# ----------------------------------------------------------------------------- the whole loop


def test_a_reviewer_on_the_cli_sees_the_secret_redacted_and_edits_the_amount(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A guarded call: ``show`` hides the key, ``approve --set amount=2500`` runs it with 2500."""
    secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
    guard = make_guard(provider)
    ran: list[tuple[str, int, str, str]] = []

    @guard.requires_approval(editable=("amount",), redact=("api_key",))
    def issue_refund(payment_id: str, amount: int, currency: str, api_key: str) -> dict[str, Any]:
        ran.append((payment_id, amount, currency, api_key))
        return {"refunded": amount, "currency": currency}

    try:
        thread, box = in_thread(lambda: issue_refund("payment_123", 4900, "GBP", secret))
        request = provider.next_request(timeout=10)

        code, shown, _ = run(capsys, provider, "show", request.id)
        assert 0 == code
        assert '"api_key": \u2039redacted ' in shown and secret not in shown
        listed = run(capsys, provider, "list")[1]
        assert "\u2039redacted " in listed and secret not in listed

        code, _, err = run(capsys, provider, "approve", request.id, "--set", "amount=2500")
        assert (0, "") == (code, err)
        out = finish(thread, box)
        row = guard.ledger.get(request.id)
    finally:
        guard.close()

    assert {"refunded": 2500, "currency": "GBP"} == out
    assert [("payment_123", 2500, "GBP", secret)] == ran
    assert type(ran[0][1]) is int
    assert row is not None
    edited = {**request.arguments, "amount": 2500}
    assert hashlib.sha256(canonical_json(edited).encode()).hexdigest() == row.arguments_digest
