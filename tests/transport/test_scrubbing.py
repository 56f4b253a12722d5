"""What a provider (or anything between us and it) sends never makes a guarded call misbehave.

Over real HTTP on 127.0.0.1: the real local provider, a rewriting proxy in
front of it, a hostile provider that echoes our credential back, and an
environment proxy that must never see a plain-http call.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import logging
import socket
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._codec.clock import SystemClock
from approval_guard._codec.wire import format_http_date, format_timestamp
from approval_guard._transport import exchange
from approval_guard._transport.answer import TransportError
from approval_guard._transport.scrub import SECRET_WORDS, Scrubber, scrub_text
from approval_guard._transport.sync_client import ProviderClient
from approval_guard.testing import LocalProvider
from tests.support.guards import make_guard, refund_tool

# Has characters that URL-encoding changes, so every encoded form differs.
SECRET = "agi_s3cret/t0ken+never=shown_123"


@attrs.define
class Reply:
    """An HTTP answer as a test server sends it, byte for byte."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


Handler = Callable[[str, str, dict[str, str], bytes], Reply]


class ScriptedServer:
    """A tiny HTTP server on 127.0.0.1 whose every answer is ``handler``'s (one per connection)."""

    def __init__(self, handler: Handler) -> None:
        outer = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                reply = handler(self.command, self.path, dict(self.headers.items()), body)
                self.send_response_only(reply.status)
                names = {name.lower() for name, _ in reply.headers}
                for name, value in reply.headers:
                    self.send_header(name, value)
                if "content-length" not in names:
                    self.send_header("Content-Length", str(len(reply.body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(reply.body)
                self.close_connection = True

            do_GET = do_POST = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=outer.server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def forward(upstream: str, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    """Send the request on to ``upstream`` and return its answer unchanged."""
    parts = urllib.parse.urlsplit(upstream)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=70)
    try:
        sent = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
        conn.request(method, path, body=body or None, headers=sent)
        response = conn.getresponse()
        return Reply(response.status, response.getheaders(), response.read())
    finally:
        conn.close()


@pytest.fixture
def servers() -> Iterator[list[ScriptedServer]]:
    started: list[ScriptedServer] = []
    yield started
    for server in started:
        server.close()


def rewriting_proxy(
    servers: list[ScriptedServer], upstream: str, rewrite: Callable[[str, str, Reply], Reply]
) -> str:
    """The URL of a proxy in front of ``upstream`` that passes each answer through ``rewrite``."""

    def handle(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        reply = forward(upstream, method, path, headers, body)
        reply.headers = [(k, v) for k, v in reply.headers if k.lower() != "content-length"]
        return rewrite(method, path, reply)

    server = ScriptedServer(handle)
    servers.append(server)
    return server.url


def set_header(reply: Reply, name: str, value: str) -> Reply:
    reply.headers = [(k, v) for k, v in reply.headers if k.lower() != name.lower()]
    reply.headers.append((name, value))
    return reply


def is_create(method: str, path: str) -> bool:
    return method == "POST" and urllib.parse.urlsplit(path).path == "/v1/requests"


def quick_guard(url: str, credential: str, **options: Any) -> ag.Guard:
    settings: dict[str, Any] = {
        "base_url": url,
        "credential": credential,
        "harness_limit": "4s",
        "poll_wait": "1s",
        "return_margin": "1s",
        "deadline_margin": "1s",
    }
    settings.update(options)
    return ag.Guard(**settings)


# -- item 2: headers are parsed strictly and never raise ------------------------


@pytest.mark.parametrize("on", ["create", "poll"])
@pytest.mark.parametrize(
    "retry_after", ["\u00b2", "\u00b9\u00b2\u00b3", "Fri, 31 Dec 9999 23:59:59 -2359"]
)
def test_a_retry_after_that_is_not_rfc_9110_is_ignored(
    approving: LocalProvider, on: str, retry_after: str
) -> None:
    """A Unicode-digit or calendar-edge Retry-After is treated as absent: backoff, retry, run."""
    approving.faults.add("status", on=on, status=503, retry_after=retry_after)
    ran: list[Any] = []
    tool = refund_tool(make_guard(approving), ran)
    assert {"refund_id": "re_1", "amount": 1} == tool("p_1", 1)
    assert [("p_1", 1, "GBP")] == ran


def _two_digit_year(date: str) -> str:
    moment = datetime.strptime(date, "%a, %d %b %Y %H:%M:%S GMT")
    return moment.strftime("%a, %d %b %y %H:%M:%S GMT")


def _rfc850(date: str) -> str:
    moment = datetime.strptime(date, "%a, %d %b %Y %H:%M:%S GMT")
    return moment.strftime("%A, %d-%b-%y %H:%M:%S GMT")


@pytest.mark.parametrize(
    "bad_date",
    [
        lambda date: "Fri, 31 Dec 9999 23:59:59 -2359",
        lambda date: "Mon, 01 Jan 0001 00:00:00 +2359",
        _two_digit_year,
        _rfc850,
        lambda date: date.replace("GMT", "+0000"),
        lambda date: date.replace("GMT", "-0100"),
    ],
    ids=["overflow", "underflow", "two_digit_year", "rfc850", "numeric_zone", "other_zone"],
)
def test_an_approval_whose_date_header_is_not_an_http_date_does_not_run(
    approving: LocalProvider, servers: list[ScriptedServer], bad_date: Callable[[str], str]
) -> None:
    """A Date that is not RFC 9110's (or would overflow) is no Date: the approval cannot run."""

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        date = dict(reply.headers)["Date"]
        return set_header(reply, "Date", bad_date(date))

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    tool = refund_tool(make_guard(approving, base_url=url), ran)
    out = tool("p_1", 1)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert "Date" in str(out)
    assert [] == ran


@pytest.mark.parametrize(
    "body",
    [b"[" * 200_000 + b"]" * 200_000, b'{"a": ' * 100_000 + b"1" + b"}" * 100_000],
    ids=["deep_list", "deep_object"],
)
def test_a_create_answer_too_deep_to_decode_is_retried_and_the_request_adopted(
    approving: LocalProvider, servers: list[ScriptedServer], body: bytes
) -> None:
    """A body that makes the JSON decoder give up is garbage: the retried create adopts it."""
    spoiled: list[str] = []

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        if is_create(method, path) and not spoiled:
            spoiled.append(path)
            reply.body = body
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    tool = refund_tool(make_guard(approving, base_url=url), ran)
    assert {"refund_id": "re_1", "amount": 1} == tool("p_1", 1)
    assert [("p_1", 1, "GBP")] == ran
    assert 1 == len(approving.requests())


@pytest.mark.parametrize("length", ["\u00b2", "\u00b9\u00b2", "1" * 5000])
def test_a_content_length_that_is_not_ascii_digits_does_not_break_the_call(
    approving: LocalProvider, servers: list[ScriptedServer], length: str
) -> None:
    """Content-Length is read as ASCII digits or not at all: the call goes on and runs once."""
    spoiled: list[str] = []

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        if is_create(method, path) and not spoiled:
            spoiled.append(path)
            return set_header(reply, "Content-Length", length)
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(
        make_guard(approving, base_url=url), ran
    )("p_1", 1)
    assert [("p_1", 1, "GBP")] == ran


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


# -- item 15: timestamps are RFC 3339 or nothing --------------------------------


def _week_date(moment: datetime) -> str:
    year, week, day = moment.isocalendar()
    return f"{year}-W{week:02d}-{day}T{moment:%H:%M:%S}Z"


@pytest.mark.parametrize(
    "spell",
    [
        _week_date,
        lambda moment: f"{moment:%Y%m%dT%H%M%S}Z",
        lambda moment: f"{moment + timedelta(hours=1):%Y-%m-%dT%H}Z",
        lambda moment: f"{moment:%Y-%m-%d %H:%M:%S}Z",
        lambda moment: f"{moment:%Y-%j}T{moment:%H:%M:%S}Z",
        lambda moment: f"{moment:%Y-%m-%dT%H:%M}:60Z",
    ],
    ids=["week_date", "basic_format", "hour_only", "space", "ordinal_date", "leap_second"],
)
def test_an_approval_whose_expiry_is_not_rfc_3339_does_not_run(
    approving: LocalProvider, servers: list[ScriptedServer], spell: Callable[[datetime], str]
) -> None:
    """An expires_at in another ISO 8601 form (or a leap second) is unreadable: no run."""

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        try:
            body = json.loads(reply.body)
        except ValueError:
            return reply
        decision = body.get("decision") if isinstance(body, dict) else None
        if isinstance(decision, dict) and decision.get("expires_at"):
            later = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(minutes=5)
            decision["expires_at"] = spell(later)
            reply.body = json.dumps(body).encode()
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    out = refund_tool(make_guard(approving, base_url=url), ran)("p_1", 1)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert "expires_at" in str(out)
    assert [] == ran


def test_an_approval_with_any_rfc_3339_offset_and_long_fraction_runs(
    approving: LocalProvider, servers: list[ScriptedServer]
) -> None:
    """Lower-case t/z, an offset and a nanosecond fraction are RFC 3339: the approval runs."""

    def rewrite(method: str, path: str, reply: Reply) -> Reply:
        body = json.loads(reply.body) if reply.body else None
        decision = body.get("decision") if isinstance(body, dict) else None
        if isinstance(decision, dict) and decision.get("expires_at"):
            later = datetime.now(timezone(timedelta(hours=-5))) + timedelta(minutes=5)
            decision["expires_at"] = f"{later:%Y-%m-%dt%H:%M:%S}.123456789-05:00"
            decision["decided_at"] = format_timestamp(datetime.now(timezone.utc)).lower()
            reply.body = json.dumps(body).encode()
        return reply

    url = rewriting_proxy(servers, approving.url, rewrite)
    ran: list[Any] = []
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(
        make_guard(approving, base_url=url), ran
    )("p_1", 1)


# -- item 10: plain http never goes through an environment proxy ----------------


class RecordingProxy:
    """A 'proxy' on 127.0.0.1 that records every byte it is sent and answers nothing."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                except OSError:
                    pass
                self.received.append(data)

    def close(self) -> None:
        self.sock.close()


PROXY_VARIABLES = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
]


@pytest.fixture
def env_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProxy]:
    proxy = RecordingProxy()
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, proxy.url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield proxy
    proxy.close()


def test_a_plain_http_provider_is_never_reached_through_an_environment_proxy(
    approving: LocalProvider, env_proxy: RecordingProxy
) -> None:
    """With every *_PROXY variable set, a loopback http call goes direct; the proxy sees nothing."""
    ran: list[Any] = []
    tool = refund_tool(quick_guard(approving.url, approving.credential), ran)
    assert {"refund_id": "re_1", "amount": 1} == tool("p_1", 1)
    assert [] == env_proxy.received


def test_an_https_provider_goes_through_an_environment_proxy_in_a_tunnel(
    env_proxy: RecordingProxy,
) -> None:
    """For https the environment's proxy is used, by CONNECT: the token is never sent in clear."""
    client = ProviderClient("https://approvals.example.com", SECRET, clock=SystemClock())
    try:
        with pytest.raises(TransportError):
            client.perform(exchange.create(b"{}", "key-1", timeout=3))
    finally:
        client.close()
    assert env_proxy.received
    assert env_proxy.received[0].startswith(b"CONNECT approvals.example.com:443 ")
    assert all(SECRET.encode() not in data for data in env_proxy.received)


# -- item 4: the credential never comes back out --------------------------------


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


# -- the scrubber's shortcut is sound -------------------------------------------

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
