"""The credential never comes back out, and what a provider writes is quoted bounded,
printable and scrubbed: in a NotRun (str, repr, JSON), a log line or an exception.

Over real HTTP on 127.0.0.1: a scripted provider that echoes our credential back in
every form, and the real local provider behind a rewriting proxy.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.parse
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.safe_text import SECRET_WORDS, safe_text, scrub_text
from approval_guard._codec.wire import MESSAGE_LIMIT, WireError, format_http_date, format_timestamp
from approval_guard._codec.wire_models import parse_error
from approval_guard._transport.answer import TransportError
from approval_guard._transport.scrub import Scrubber
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard, refund_tool
from tests.support.scripted import (
    SECRET,
    Reply,
    ScriptedServer,
    is_create,
    quick_guard,
    rewriting_proxy,
    set_header,
)


def secret_forms(secret: str) -> list[str]:
    raw = secret.encode()
    return [
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
    ]


def echo_all(headers: dict[str, str]) -> str:
    """What a careless gateway says: every form of the Authorization it was sent."""
    auth = headers.get("Authorization", "")
    token = auth.partition(" ")[2]
    forms = " ".join(secret_forms(token))
    return f"headers were {headers!r}; Authorization: {auth}; token {forms}"


def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    return Reply(status, [("Content-Type", "application/json"), *(headers or {}).items()], body)


def _request(body: bytes, status: str, **extra: Any) -> dict[str, Any]:
    sent = json.loads(body) if body else {}
    now = datetime.now(timezone.utc)
    return {
        "id": str(uuid.uuid4()),
        "tool": sent.get("tool", "issue_refund"),
        "arguments": sent.get("arguments", {}),
        "timeout": sent.get("timeout", "30m"),
        "status": status,
        "created_at": format_timestamp(now),
        "deadline_at": format_timestamp(now + timedelta(minutes=30)),
        **extra,
    }


def _ok(obj: dict[str, Any], status: int = 201, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status,
        [
            ("Content-Type", "application/json"),
            ("Date", format_http_date(datetime.now(timezone.utc))),
            *(headers or {}).items(),
        ],
        json.dumps(obj).encode(),
    )


Script = Callable[[str, str, dict[str, str], bytes, dict[str, Any]], Reply]


def _5xx_then_4xx(
    method: str, path: str, headers: dict[str, str], body: bytes, state: dict[str, Any]
) -> Reply:
    state["n"] = state.get("n", 0) + 1
    if state["n"] == 1:
        return _error(
            503, "unavailable", "upstream: " + echo_all(headers), headers={"Retry-After": "0"}
        )
    return _error(400, "invalid_request", "\x1b[31m" + echo_all(headers) + "\n" + "x" * 1_000_000)


def _echo_in_the_note(
    method: str, path: str, headers: dict[str, str], body: bytes, state: dict[str, Any]
) -> Reply:
    if is_create(method, path):
        state["request"] = _request(body, "pending")
        return _ok(state["request"], headers={"X-Request-ID": headers["Authorization"]})
    now = format_timestamp(datetime.now(timezone.utc))
    decision = {"status": "denied", "note": "I saw " + echo_all(headers), "decided_at": now}
    return _ok({**state["request"], "status": "denied", "decision": decision}, status=200)


def _4xx_on_the_poll(
    method: str, path: str, headers: dict[str, str], body: bytes, state: dict[str, Any]
) -> Reply:
    if is_create(method, path):
        state["request"] = _request(body, "pending")
        return _ok(state["request"])
    if method == "POST":  # the cancel
        return _error(500, "internal", echo_all(headers))
    return _error(
        403, "forbidden", echo_all(headers), headers={"X-Request-ID": "id " + echo_all(headers)}
    )


def _echo_in_a_field(
    method: str, path: str, headers: dict[str, str], body: bytes, state: dict[str, Any]
) -> Reply:
    token = headers["Authorization"].partition(" ")[2]
    return _ok(_request(body, "pending", created_at=token, deadline_at=headers["Authorization"]))


def _echo_in_the_status(
    method: str, path: str, headers: dict[str, str], body: bytes, state: dict[str, Any]
) -> Reply:
    if is_create(method, path):
        state["request"] = _request(body, "pending")
        return _ok(state["request"])
    return _ok({**state["request"], "status": echo_all(headers)}, status=200)


@pytest.mark.parametrize(
    "script",
    [_5xx_then_4xx, _echo_in_the_note, _4xx_on_the_poll, _echo_in_a_field, _echo_in_the_status],
    ids=["5xx_then_4xx", "note", "4xx_on_poll", "wire_error", "status"],
)
def test_a_provider_that_echoes_the_credential_never_gets_it_shown(
    servers: list[ScriptedServer], caplog: pytest.LogCaptureFixture, script: Script
) -> None:
    """The credential, in any form, reaches no NotRun (str, repr, JSON), log line or exception."""
    state: dict[str, Any] = {}
    server = ScriptedServer(lambda m, p, h, b: script(m, p, h, b, state))
    servers.append(server)
    caplog.set_level(logging.DEBUG, logger="approval_guard")
    ran: list[Any] = []
    out = refund_tool(quick_guard(server.url, SECRET), ran)("p_1", 1)
    assert isinstance(out, ag.NotRun)
    assert [] == ran
    shown = [str(out), repr(out), out.to_json(), caplog.text]
    shown += [str(r.exc_info[1]) for r in caplog.records if r.exc_info and r.exc_info[1]]
    for form in secret_forms(SECRET):
        assert all(form not in text for text in shown), form
    assert len(str(out)) < 2000
    assert str(out).isprintable()
    assert all("\x1b" not in r.getMessage() for r in caplog.records)


def test_a_reviewers_note_without_secrets_is_kept_word_for_word(
    servers: list[ScriptedServer],
) -> None:
    """Scrubbing takes only secret-shaped text: an ordinary note reaches the model unchanged."""
    note = "Token provided by the customer was checked; Basic plan, no refund.\nSee ticket 42."
    state: dict[str, Any] = {}

    def script(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if is_create(method, path):
            state["request"] = _request(body, "pending")
            return _ok(state["request"])
        now = format_timestamp(datetime.now(timezone.utc))
        decision = {"status": "denied", "note": note, "decided_at": now}
        return _ok({**state["request"], "status": "denied", "decision": decision}, status=200)

    server = ScriptedServer(script)
    servers.append(server)
    out = refund_tool(quick_guard(server.url, SECRET), [])("p_1", 1)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.DENIED == out.reason
    assert note == out.note


_PIECES = st.sampled_from(
    [*secret_forms(SECRET), "Bearer ", "Authorization: ", "token=", "Basic ", " ", "x", "\u212a"]
)
_STRINGS = st.one_of(st.text(max_size=20), st.lists(_PIECES, max_size=6).map("".join))
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _STRINGS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_STRINGS, inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_STRINGS)
def test_every_secret_shaped_text_holds_a_secret_word(text: str) -> None:
    """What scrub_text changes always holds one of SECRET_WORDS (the shortcut's test)."""
    if scrub_text(text) != text:
        assert any(word in text.lower() for word in SECRET_WORDS)


@given(_JSON, st.booleans())
def test_the_scrubbers_shortcut_agrees_with_the_full_walk(value: Any, ascii_only: bool) -> None:
    """Skipping the walk for a clean body gives exactly what the walk would have."""
    scrubber = Scrubber(SECRET)
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert scrubber.json(value) == scrubber.body(raw, value)


# From the hardening pass, item 2: headers are parsed strictly and never raise.
def test_a_request_id_header_is_kept_bounded_and_printable(
    approving: LocalProvider, servers: list[ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    """An X-Request-ID with control characters and 10 000 characters is logged cut and clean."""

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        return set_header(reply, "X-Request-ID", "\x1b[2J\x07" + "r" * 10_000)

    url = rewriting_proxy(servers, approving.url, rewrite)
    caplog.set_level(logging.DEBUG, logger="approval_guard")
    ran: list[Any] = []
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(
        make_guard(approving, base_url=url), ran
    )("p_1", 1)
    logged = [r.getMessage() for r in caplog.records if "provider_request_id" in r.getMessage()]
    assert logged
    assert all("\x1b" not in line and "\x07" not in line and len(line) < 1000 for line in logged)


@given(st.text(), st.integers(min_value=1, max_value=600))
def test_safe_text_is_bounded_and_printable(text: str, limit: int) -> None:
    """Whatever a provider wrote, what is quoted is at most ``limit`` (+ "...") and printable."""
    out = safe_text(text, limit)
    assert len(out) <= limit + 3
    assert out.isprintable()


@pytest.mark.parametrize(
    ("expected", "text"),
    [
        ("Authorization: *** was refused", "Authorization: Bearer abc.DEF-123 was refused"),
        ("{'authorization': '***'}", "{'authorization': 'Bearer agi_secret_1'}"),
        ('{"token": "***"}', '{"token": "s3cr3t"}'),
        ("password=***&next=1", "password=hunter2&next=1"),
        ("got Bearer *** back", "got Bearer agi_secret_token_123 back"),
        ("Basic ***", "Basic dXNlcjpwYXNz"),
        ("Token provided was checked", "Token provided was checked"),
        ("Basic authentication is not supported", "Basic authentication is not supported"),
        ('Bearer realm="api"', 'Bearer realm="api"'),
    ],
)
def test_scrub_text_removes_what_is_shaped_like_a_secret(expected: str, text: str) -> None:
    """Authorization values and credential-shaped tokens go; ordinary words stay."""
    assert expected == scrub_text(text)


def test_wire_and_transport_errors_are_bounded_and_printable() -> None:
    """A megabyte of provider text with control characters never becomes a megabyte message."""
    text = "\x1b[31m" + "x" * 1_000_000 + "\n\x00"
    for message in (str(WireError(text)), TransportError("garbage", text).message):
        assert len(message) <= MESSAGE_LIMIT + 3
        assert message.isprintable()


def test_an_error_body_is_quoted_bounded_and_scrubbed() -> None:
    """parse_error's type and message are short, printable and free of Authorization values."""
    body = {
        "error": {"type": "t\x00" * 1000, "message": "Authorization: Bearer x1y2z3w4v5\n" * 10**5}
    }
    parsed = parse_error(body)
    assert parsed is not None
    kind, message = parsed
    assert len(kind) < 100 and kind.isprintable()
    assert len(message) <= MESSAGE_LIMIT + 3 and message.isprintable()
    assert "x1y2z3w4v5" not in message
