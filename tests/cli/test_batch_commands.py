"""API 1.3 in the reviewer's commands: several ids at once, and the agent's stated reason shown."""

from __future__ import annotations

import http.server
import json
from typing import Any

import pytest
import requests

from approval_guard.cli import main
from approval_guard.testing import LocalProvider
from tests.support.cli import create, read, run
from tests.support.serving import serve_in_thread

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


class _Older(http.server.BaseHTTPRequestHandler):
    """A 1.2 provider in front of a real one: ``POST /v1/decisions`` is 404, the rest relayed."""

    target = ""

    def do_GET(self) -> None:
        self._relay("GET")

    def do_POST(self) -> None:
        if self.path.startswith("/v1/decisions"):
            body = b'{"error":{"type":"not_found","message":"no such path"}}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self._relay("POST")

    def _relay(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        answer = requests.request(
            method, self.target + self.path, data=data, headers=headers, timeout=10
        )
        self.send_response(answer.status_code)
        self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


def test_several_ids_against_an_older_provider_are_decided_one_by_one(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """A provider without POST /v1/decisions: each id is decided alone, the same lines printed."""
    handler = type("Older", (_Older,), {"target": provider.url})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_thread(server)
    try:
        ids = [create(provider), create(provider)]
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code = main(
            [
                "approve",
                ids[0],
                "missing-id",
                ids[1],
                "--url",
                url,
                "--token",
                provider.reviewer_credential,
            ]
        )
        out, err = capsys.readouterr()
    finally:
        server.shutdown()
        server.server_close()
    assert 1 == code
    assert "1 of 3 requests were not decided" in err
    lines = out.splitlines()
    assert [f"approved {ids[0]}", f"approved {ids[1]}"] == [lines[0], lines[2]]
    assert lines[1].startswith("missing-id: not decided:")
    assert ["approved", "approved"] == [read(provider, one)["status"] for one in ids]


def test_a_grant_with_several_ids_is_a_usage_error_not_dropped(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """``approve A B --grant-for 1h`` gives no grant silently: exit 2, nothing decided."""
    one, two = create(provider), create(provider)
    code, _, err = run(capsys, provider, "approve", one, two, "--grant-for", "1h")
    assert 2 == code, err
    assert "--grant" in err
    assert 2 == run(capsys, provider, "approve", one, two, "--grant-uses", "0")[0]
    assert ["pending", "pending"] == [read(provider, x)["status"] for x in (one, two)]
