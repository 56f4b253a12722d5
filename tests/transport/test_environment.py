"""The environment cannot redirect or re-authenticate a call: no proxy for plain http, a
CONNECT tunnel for https (the token never in clear), a .netrc entry ignored.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from approval_guard._codec.clock import SystemClock
from approval_guard._transport import exchange
from approval_guard._transport.answer import TransportError
from approval_guard._transport.sync_client import ProviderClient
from approval_guard.testing import LocalProvider, approve_after
from tests.support.fakes import SECRET
from tests.support.guards import make_guard, refund_tool
from tests.support.scripted import quick_guard


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


# From the hardening pass, item 10: plain http never goes through an environment proxy.
def test_a_plain_http_provider_is_never_reached_through_an_environment_proxy(
    approving: LocalProvider, env_proxy: RecordingProxy
) -> None:
    """With every *_PROXY variable set, a loopback http call goes direct; the proxy sees nothing."""
    ran: list[Any] = []
    tool = refund_tool(quick_guard(approving.url, approving.credential), ran)
    assert {"refund_id": "re_1", "amount": 1} == tool("p_1", 1)
    assert [] == env_proxy.received


# From the hardening pass, item 10: plain http never goes through an environment proxy.
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


def test_netrc_does_not_replace_the_credential(
    provider: LocalProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .netrc entry for the provider's host does not replace the Bearer credential."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password elsewhere\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    provider.policy = approve_after(0.0)
    assert {"refund_id": "re_1", "amount": 1} == refund_tool(make_guard(provider), [])("p", 1)
