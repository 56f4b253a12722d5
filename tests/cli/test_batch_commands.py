"""API 1.3 in the reviewer's commands: several ids at once, and the agent's stated reason shown."""

from __future__ import annotations

import json

import pytest

from approval_guard.testing import LocalProvider
from tests.support.cli import create, read, run

HOSTILE = "Refund it.\x1b[2J\x1b]0;pwned\x07 \u202eevil\nsecond line"


def test_approve_several_ids_decides_each_and_prints_one_line_each_in_order(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``approve A B C``: A and C approved, the unknown B says why; exit 1; the order kept."""
    first, last = create(provider, batch="t1"), create(provider, batch="t1")
    other = create(provider, batch="t1")
    code, out, err = run(capsys, provider, "approve", first, "no-such-id", last, "--note", "ok")
    assert 1 == code
    lines = out.splitlines()
    assert [f"approved {first}", f"approved {last}"] == [lines[0], lines[2]]
    assert lines[1].startswith("no-such-id: not decided:") and "(not_found)" in lines[1]
    assert "1 of 3 requests were not decided" in err
    assert ("approved", "ok") == (
        read(provider, first)["status"],
        read(provider, first)["decision"]["note"],
    )
    assert "pending" == read(provider, other)["status"]


def test_deny_several_ids_denies_each_with_the_one_note(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``deny A B --note`` denies both with that note; exit 0."""
    ids = [create(provider), create(provider)]
    code, out, _ = run(capsys, provider, "deny", *ids, "--note", "not now")
    assert 0 == code
    assert [f"denied {one}" for one in ids] == out.splitlines()
    for one in ids:
        assert ("denied", "not now") == (
            read(provider, one)["status"],
            read(provider, one)["decision"]["note"],
        )


def test_a_repeated_id_or_an_edit_with_several_ids_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """Exit code 2 and nothing sent: the request stays pending."""
    one, two = create(provider), create(provider)
    assert 2 == run(capsys, provider, "approve", one, one)[0]
    assert 2 == run(capsys, provider, "approve", one, two, "--set", "amount=1")[0]
    assert ["pending", "pending"] == [read(provider, x)["status"] for x in (one, two)]


def test_show_prints_the_agents_words_escaped_above_the_arguments(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """The reason is labelled as the agent's, each line quoted, escape sequences made visible."""
    request_id = create(provider, batch="turn-9", context=HOSTILE)
    code, out, _ = run(capsys, provider, "show", request_id)
    assert 0 == code
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert out.index("the agent says") < out.index("  | Refund it.") < out.index("arguments")
    assert "  | second line" in out
    assert "batch        turn-9" in out


def test_list_prints_the_agents_words_under_the_row_and_in_json(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """The table shows the reason on one escaped line; ``--json`` carries batch and context."""
    request_id = create(provider, batch="turn-9", context=HOSTILE)
    code, out, _ = run(capsys, provider, "list")
    assert 0 == code
    assert "\x1b" not in out and "the agent says:" in out
    code, out, _ = run(capsys, provider, "list", "--json")
    (listed,) = json.loads(out)
    assert (request_id, "turn-9", HOSTILE) == (listed["id"], listed["batch"], listed["context"])
