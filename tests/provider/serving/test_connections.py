"""The provider as a service: limits, slow clients, keep-alive, TLS and a graceful SIGTERM.

Real sockets on 127.0.0.1 against the Starlette + uvicorn server, and a real
provider process for the signal.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from approval_guard.provider import ProviderServer, Store
from tests.support.api import REFUND, Api
from tests.support.paths import REPO


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(":memory:", keep_alive_seconds=1, client_timeout_seconds=2) as running:
        yield running


BARE_PROVIDER = [sys.executable, "-m", "approval_guard.provider.serving.process"]


def _tokens(server: ProviderServer) -> tuple[str, str]:
    tokens = server.first_start_tokens
    assert tokens is not None
    return tokens.instance, tokens.reviewer


def _connect(server: ProviderServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_request_head_over_the_limit_is_a_json_400_and_others_still_get_answers(
    server: ProviderServer,
) -> None:
    instance, _ = _tokens(server)
    sock = _connect(server)
    try:
        sock.sendall(
            b"GET /v1/requests/x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n"
        )
        raw = _read_all(sock)
    finally:
        sock.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert "invalid_request" == json.loads(body)["error"]["type"]
    assert 404 == Api(server.url, instance).poll(str(uuid.uuid4())).status_code


def test_a_body_over_64_kib_is_413_and_nothing_is_stored(server: ProviderServer) -> None:
    instance, _ = _tokens(server)
    api = Api(server.url, instance)
    response = api.create(arguments={"blob": "x" * (64 * 1024)})
    assert 413 == response.status_code
    assert "invalid_request" == response.json()["error"]["type"]
    assert [] == server.store.list_requests()


def test_two_hundred_slow_clients_do_not_delay_anyone_else(server: ProviderServer) -> None:
    """200 clients dripping one byte a second: other requests answer within 100 ms of normal."""
    instance, _ = _tokens(server)
    api = Api(server.url, instance)
    request_id = api.new()["id"]

    def timed_polls(n: int) -> list[float]:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            assert 200 == api.poll(request_id).status_code
            out.append(time.perf_counter() - start)
        return out

    baseline = max(timed_polls(20))
    slow = [_connect(server) for _ in range(200)]
    stop = threading.Event()

    def drip() -> None:
        line = b"GET /v1/requests HTTP/1.1\r\n"
        for i in range(len(line)):
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.send(line[i : i + 1])
            if stop.wait(1.0):
                return

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        time.sleep(0.5)
        during = timed_polls(40)
    finally:
        stop.set()
        dripper.join(5)
        for sock in slow:
            sock.close()
    assert max(during) < baseline + 0.1, (baseline, max(during))


def test_a_client_that_never_finishes_its_head_is_disconnected(server: ProviderServer) -> None:
    sock = _connect(server)
    try:
        sock.sendall(b"GET /v1/requ")
        start = time.monotonic()
        assert b"" == _read_all(sock)  # closed by the server, with no answer
        assert 1.5 < time.monotonic() - start < 6
    finally:
        sock.close()


def test_an_idle_keep_alive_connection_is_closed_after_its_timeout(
    server: ProviderServer,
) -> None:
    sock = _connect(server)
    try:
        sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: a\r\n\r\n")
        first = b""
        while not first.endswith(b"}}"):  # the whole 401 answer: its body ends the JSON
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 401 ")
        start = time.monotonic()
        assert b"" == _read_all(sock)
        assert 0.5 < time.monotonic() - start < 5
    finally:
        sock.close()


def test_a_waiting_long_poll_is_not_cut_by_the_timeouts(server: ProviderServer) -> None:
    """A poll waiting longer than the keep-alive and head timeouts still gets its answer."""
    instance, reviewer = _tokens(server)
    api = Api(server.url, instance)
    request_id = api.new()["id"]
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(api.poll(request_id, wait="4s")))
    thread.start()
    time.sleep(3)
    Api(server.url, reviewer).decide(request_id, {"status": "approved"})
    thread.join(10)
    assert "approved" == result[0].json()["status"]


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "5"])
def test_bad_timeouts_are_refused_when_the_server_is_made(bad: Any) -> None:
    with pytest.raises(ValueError, match="keep_alive_seconds"):
        ProviderServer(":memory:", keep_alive_seconds=bad)


# ----------------------------------------------------------------------------- TLS


def _self_signed(folder: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def test_tls_serves_the_api_over_https(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    with ProviderServer(":memory:", tls_certfile=cert, tls_keyfile=key) as server:
        assert server.url.startswith("https://127.0.0.1:")
        instance, _ = _tokens(server)
        response = requests.post(
            f"{server.url}/v1/requests",
            json={"tool": "t", "arguments": REFUND, "timeout": "30m"},
            headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": "k"},
            verify=cert,
            timeout=10,
        )
        assert 201 == response.status_code, response.text
        with pytest.raises(requests.ConnectionError):  # plain HTTP is not answered
            requests.get(server.url.replace("https", "http", 1) + "/v1/events", timeout=5)


def test_tls_needs_both_files() -> None:
    with pytest.raises(ValueError, match="both"):
        ProviderServer(":memory:", tls_certfile="cert.pem")


def test_serve_off_loopback_starts_with_tls(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    db = tmp_path / "a.sqlite3"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "approval_guard",
            "serve",
            "--db",
            str(db),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "provider listening on https://0.0.0.0:" in line, line + (
            process.stderr.read() if process.poll() is not None and process.stderr else ""
        )
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=20)
    assert 0 == process.returncode, err
    assert "warning" not in err  # TLS: no plain-HTTP warning


# ----------------------------------------------------------------------------- SIGTERM


def test_sigterm_answers_waiting_polls_with_the_current_state_and_loses_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "approvals.sqlite3"
    store = Store(str(db))
    instance = store.create_credential("instance", "test")
    store.close()
    process = subprocess.Popen(
        [*BARE_PROVIDER, "--db", str(db), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert process.stdout is not None
        url = json.loads(process.stdout.readline())["url"]
        api = Api(url, instance)
        created = [api.new()["id"] for _ in range(3)]
        answers: list[Any] = []
        polls = [
            threading.Thread(target=lambda rid=rid: answers.append(api.poll(rid, wait="60s")))
            for rid in created
        ]
        for thread in polls:
            thread.start()
        time.sleep(1.0)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        for thread in polls:
            thread.join(15)
        waited = time.monotonic() - sent
        assert 0 == process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)
    assert [200, 200, 200] == [answer.status_code for answer in answers]
    assert {"pending"} == {answer.json()["status"] for answer in answers}
    assert waited < 5
    reopened = Store(str(db))
    try:
        assert set(created) == {request.id for request in reopened.list_requests()}
    finally:
        reopened.close()


def test_an_encoded_slash_does_not_pick_another_endpoint(server: ProviderServer) -> None:
    """``POST /v1/requests/ID%2Fcancel`` is no cancel of ID: routing uses the path as sent."""
    instance, _ = _tokens(server)
    api = Api(server.url, instance)
    request_id = api.new()["id"]
    answer = api.post_raw(f"/v1/requests/{request_id}%2Fcancel", b"")
    assert 405 == answer.status_code
    assert "pending" == api.poll(request_id).json()["status"]
    assert 404 == api.poll(f"{request_id}%2F").status_code


def test_a_poll_whose_client_hangs_up_stops_waiting(server: ProviderServer) -> None:
    instance, _ = _tokens(server)
    api = Api(server.url, instance)
    ids = [api.new()["id"] for _ in range(20)]
    clients = []
    for request_id in ids:
        sock = _connect(server)
        sock.sendall(
            f"GET /v1/requests/{request_id}?wait=60s HTTP/1.1\r\nHost: a\r\n"
            f"Authorization: Bearer {instance}\r\n\r\n".encode()
        )
        clients.append(sock)
    assert server.wait_for_waiting_polls(20, timeout=10)
    for sock in clients:
        sock.close()
    end = time.monotonic() + 5
    while server.waiting_polls and time.monotonic() < end:
        time.sleep(0.05)
    assert 0 == server.waiting_polls  # not held until the 60 s wait ends
