"""Nothing is lost on kill -9, SIGTERM or a restart; deadlines keep running while the provider
is down.
"""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from approval_guard.provider import ProviderServer, Store
from approval_guard.testing import LocalProvider
from tests.support.api import Api, in_thread
from tests.support.paths import REPO

_LAUNCH = "approval_guard.provider.serving.process"


class ProviderProcess:
    """The provider in a child process, so that it can really be SIGKILLed."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", _LAUNCH, "--db", str(self.db)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.url = json.loads(line)["url"]
        return self.url

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()  # the next start() opens a pipe of its own

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


@pytest.fixture
def process(tmp_path: Path) -> Iterator[ProviderProcess]:
    child = ProviderProcess(tmp_path / "approvals.sqlite3")
    try:
        yield child
    finally:
        child.close()


def test_kill_9_and_restart_loses_nothing(process: ProviderProcess) -> None:
    """Pending requests, decisions, idempotency keys and credentials survive SIGKILL."""
    store = Store(str(process.db))
    instance = store.create_credential("instance", "agent")
    reviewer_token = store.create_credential("reviewer", "alice")
    store.close()

    api = Api(process.start(), instance)
    reviewer = Api(process.url, reviewer_token)
    pending = api.new(key="pending-key")
    approved = api.new(key="approved-key")
    approved_now = reviewer.decide(approved["id"], {"status": "approved", "note": "ok"}).json()
    cancelled = api.new(key="cancelled-key")
    api.cancel(cancelled["id"])
    short = api.new(key="short-key", timeout="1s")
    # A poll is waiting when the process dies: it gets a connection error, not an answer.
    thread, out = in_thread(lambda: api.poll(pending["id"], wait="30s"))
    time.sleep(0.2)
    process.kill()
    thread.join(5)
    assert isinstance(out[0], requests.ConnectionError)

    # Stay down past the short request's 1s deadline.
    time.sleep(1.3)

    api = Api(process.start(), instance)
    reviewer = Api(process.url, reviewer_token)
    assert pending == api.poll(pending["id"]).json()
    assert approved_now == api.poll(approved["id"]).json()
    assert "cancelled" == api.poll(cancelled["id"]).json()["status"]
    # The deadline ran out while the provider was down.
    assert "expired" == api.poll(short["id"]).json()["status"]
    # Keys survive: a retried create replays the same request with its current state.
    replay = api.create(key="approved-key")
    assert (200, approved["id"], "approved") == (
        replay.status_code,
        replay.json()["id"],
        replay.json()["status"],
    )
    assert 422 == api.create(key="pending-key", tool="other").status_code
    history = reviewer.get(f"/v1/requests/{approved['id']}/history").json()
    assert ["created", "decided"] == [e["type"] for e in history["events"]]
    assert "alice" == history["events"][1]["actor"]["name"]


def test_first_start_generates_tokens_once(tmp_path: Path) -> None:
    """A fresh database gets one instance and one reviewer token; a restart gets none."""
    db = tmp_path / "a.sqlite3"
    with ProviderServer(db) as server:
        tokens = server.first_start_tokens
        assert tokens is not None
        assert tokens.instance.startswith("agi_")
        assert tokens.reviewer.startswith("agr_")
        assert tokens.instance not in repr(tokens) and tokens.reviewer not in repr(tokens)
        assert 201 == Api(server.url, tokens.instance).create().status_code
    # Only hashes are on disk.
    raw = db.read_bytes() + (
        db.with_name(db.name + "-wal").read_bytes()
        if db.with_name(db.name + "-wal").exists()
        else b""
    )
    assert tokens.instance.encode() not in raw
    assert tokens.reviewer.encode() not in raw
    with ProviderServer(db) as again:
        assert again.first_start_tokens is None
        assert 201 == Api(again.url, tokens.instance).create().status_code


def test_server_binds_loopback_by_default(tmp_path: Path) -> None:
    """The default host is 127.0.0.1."""
    with ProviderServer(tmp_path / "b.sqlite3") as server:
        assert server.url.startswith("http://127.0.0.1:")


def test_local_provider_reopens_a_file_with_the_same_credentials(tmp_path: Path) -> None:
    """A second LocalProvider on the same file sees the first one's requests and credentials."""
    db = str(tmp_path / "t.sqlite3")
    with LocalProvider(db) as first:
        credential, reviewer = first.credential, first.reviewer_credential
        created = Api(first.url, first.credential).new(key="k")
        first.approve(created["id"])
    with LocalProvider(db) as second:
        assert (credential, reviewer) == (second.credential, second.reviewer_credential)
        api = Api(second.url, second.credential)
        assert "approved" == api.poll(created["id"]).json()["status"]
        assert 200 == api.create(key="k").status_code
        assert [created["id"]] == [r.id for r in second.requests()]


def test_local_provider_restart_keeps_url_state_and_waiting_clients_see_a_cut(
    tmp_path: Path,
) -> None:
    """stop() cuts a waiting poll; start() serves the same file on the same URL."""
    with LocalProvider(str(tmp_path / "r.sqlite3")) as provider:
        api = Api(provider.url, provider.credential)
        created = api.new(key="k")
        thread, out = in_thread(lambda: api.poll(created["id"], wait="30s"))
        assert provider.wait_for_polls(1, 5)
        url = provider.url
        provider.stop()
        thread.join(5)
        assert isinstance(out[0], requests.ConnectionError)
        provider.start()
        assert url == provider.url
        assert created == Api(provider.url, provider.credential).poll(created["id"]).json()


def test_memory_local_provider_restart_keeps_state() -> None:
    """An in-memory LocalProvider keeps its state across stop()/start()."""
    with LocalProvider() as provider:
        api = Api(provider.url, provider.credential)
        created = api.new()
        provider.stop()
        provider.start()
        assert created == Api(provider.url, provider.credential).poll(created["id"]).json()


@pytest.mark.parametrize(("hours", "replayed"), [(23, True), (25, False)])
def test_idempotency_keys_are_kept_24_hours(tmp_path: Path, hours: int, replayed: bool) -> None:
    """A key is honoured for 24 hours; after that (pruned at startup) it creates anew."""
    db = str(tmp_path / "k.sqlite3")
    with LocalProvider(db) as first:
        created = Api(first.url, first.credential).new(key="k", timeout="24h")
    with LocalProvider(db, clock_offset=timedelta(hours=hours)) as later:
        response = Api(later.url, later.credential).create(key="k", timeout="24h")
        assert (200 if replayed else 201) == response.status_code
        assert replayed == (created["id"] == response.json()["id"])


BARE_PROVIDER = [sys.executable, "-m", "approval_guard.provider.serving.process"]


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
