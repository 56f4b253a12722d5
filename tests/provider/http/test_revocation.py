"""A credential revoked while the server runs is refused at its very next request.

The server remembers which credential a token named (for a create's checks
before its body arrives), so these warm that memory first, then revoke through
another store on the same file, as the CLI in another process does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.http.auth import CredentialHints
from approval_guard.provider.store.models import Credential
from tests.support.api import Api, error_type


@pytest.fixture
def on_file(tmp_path: Path) -> Iterator[tuple[ProviderServer, Path]]:
    """A provider serving a SQLite file, and the file's path."""
    path = tmp_path / "approvals.sqlite3"
    with ProviderServer(str(path), keep_alive_seconds=1, client_timeout_seconds=2) as running:
        yield running, path


def _pending(server: ProviderServer) -> int:
    return len(server.store.list_requests(status="pending"))


def test_a_reviewer_removed_by_another_process_cannot_decide_at_once(
    on_file: tuple[ProviderServer, Path],
) -> None:
    """A reviewer removed through another store on the file gets 401; the request stays pending."""
    server, path = on_file
    creator = Api(server.url, server.store.create_credential("instance", "agent"))
    reviewer = Api(server.url, server.store.add_reviewer("alice"))
    first, second = creator.new(), creator.new()
    assert 200 == reviewer.decide(first["id"], {"status": "approved"}).status_code
    other = Store(str(path))
    try:
        assert other.remove_reviewer("alice")
    finally:
        other.close()
    refused = reviewer.decide(second["id"], {"status": "approved"})
    assert (401, "unauthorized") == (refused.status_code, error_type(refused))
    assert "pending" == server.store.get_request(second["id"]).status  # type: ignore[union-attr]


def test_an_instance_revoked_by_another_process_cannot_create_at_once(
    on_file: tuple[ProviderServer, Path],
) -> None:
    """An instance whose credential another store revoked gets 401 and creates nothing."""
    server, path = on_file
    token = server.store.create_credential("instance", "agent")
    creator = Api(server.url, token)
    creator.new()
    creator.new()  # the server now remembers which credential the token names
    credential = server.store.authenticate(token)
    assert credential is not None
    other = Store(str(path))
    try:
        assert other.revoke_credential(credential.id)
    finally:
        other.close()
    for _ in range(2):  # the second time, the server no longer remembers the token at all
        refused = creator.create()
        assert (401, "unauthorized") == (refused.status_code, error_type(refused))
    assert 2 == _pending(server)


def test_a_revoked_instance_is_refused_for_a_repeated_key_too(
    on_file: tuple[ProviderServer, Path],
) -> None:
    """A revoked instance replaying its own key is refused, not shown the request again."""
    server, _ = on_file
    token = server.store.create_credential("instance", "agent")
    creator = Api(server.url, token)
    made = creator.create(key="k1")
    assert 201 == made.status_code
    credential = server.store.authenticate(token)
    assert credential is not None
    assert server.store.revoke_credential(credential.id)
    refused = creator.create(key="k1")
    assert (401, "unauthorized") == (refused.status_code, error_type(refused))


def test_a_revoked_instance_is_401_before_a_missing_key_is_400(
    on_file: tuple[ProviderServer, Path],
) -> None:
    """A remembered token revoked since: no key, or a key in use, still answers 401 first."""
    server, _ = on_file
    token = server.store.create_credential("instance", "agent")
    creator = Api(server.url, token)
    assert 201 == creator.create().status_code  # the server now remembers the token
    credential = server.store.authenticate(token)
    assert credential is not None
    assert server.store.revoke_credential(credential.id)
    refused = creator.session.post(
        f"{server.url}/v1/requests",
        json={"tool": "t", "arguments": {}, "timeout": "1m"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert (401, "unauthorized") == (refused.status_code, error_type(refused))
    assert 1 == _pending(server)


def _credential(name: str) -> Credential:
    store = Store(":memory:")
    try:
        found = store.authenticate(store.create_credential("instance", name))
    finally:
        store.close()
    assert found is not None
    return found


def test_credential_hints_keep_no_token() -> None:
    """The hints are keyed by the token's digest: the token itself is not kept."""
    hints = CredentialHints()
    credential = _credential("agent")
    hints.remember("ag_i_the-secret-token", credential)
    assert credential == hints.get("ag_i_the-secret-token")
    assert None is hints.get("ag_i_another-token")
    assert "the-secret-token" not in repr(vars(hints))


def test_credential_hints_are_bounded() -> None:
    """Past their size the hints start again empty rather than grow."""
    hints = CredentialHints(size=2)
    credential = _credential("agent")
    hints.remember("a", credential)
    hints.remember("b", credential)
    hints.remember("c", credential)
    assert (None, None, credential) == (hints.get("a"), hints.get("b"), hints.get("c"))


def test_credential_hints_forget_a_token() -> None:
    """A forgotten token is looked up in the store again."""
    hints = CredentialHints()
    hints.remember("a", _credential("agent"))
    hints.forget("a")
    assert None is hints.get("a")
