"""Who decides is read inside the transaction that records it: a removed reviewer records nothing.

A credential read before the write (a token authenticated, then the reviewer
removed while the decision waited for the writer) must not be trusted: every
decision, grant, grant approval, grant revocation and grant use checks it again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from approval_guard.provider import PostgresStore, Store
from approval_guard.provider.rules.config import parse_rules
from approval_guard.provider.store.models import Forbidden
from approval_guard.provider.store.sql.grant_tables import GrantSpec
from tests.support.api import REFUND
from tests.support.grants import store_kind  # noqa: F401 (fixture)

QUORUM = parse_rules("[tools.issue_refund]\napprovals_required = 2\n")


@pytest.fixture
def store(store_kind: tuple[str, str | None], tmp_path: Path) -> Iterator[Any]:  # noqa: F811
    kind, dsn = store_kind
    opened: Any = (
        PostgresStore(dsn) if kind == "postgres" and dsn else Store(str(tmp_path / "s.sqlite3"))
    )
    opened.ensure_initial_credentials()
    try:
        yield opened
    finally:
        opened.close()


def new_request(store: Any, arguments: dict[str, Any] = REFUND, rules: Any = None) -> str:
    agent = next(c for c in store.list_credentials() if not c.is_reviewer)
    made = store.create_request(
        owner=agent,
        idempotency_key=str(len(store.list_requests()) + 1),
        tool="issue_refund",
        arguments=arguments,
        timeout_seconds=1800,
        approvals_required=2 if rules is QUORUM else 1,
        rules=rules,
    )
    return str(made.request.id)


def test_a_decision_by_a_reviewer_removed_since_their_token_was_read_records_nothing(
    store: Any,
) -> None:
    """The stale credential is refused (Forbidden) and the request stays pending."""
    token = store.add_reviewer("bob")
    bob = store.authenticate(token)
    request_id = new_request(store)
    assert store.remove_reviewer("bob")
    with pytest.raises(Forbidden, match="no longer a reviewer"):
        store.decide(request_id, reviewer=bob, status="approved")
    assert store.get_request(request_id).status == "pending"
    with pytest.raises(Forbidden):
        store.decide(request_id, reviewer=bob, status="denied")
    assert store.get_request(request_id).status == "pending"


def test_roles_are_read_in_the_transaction_too(store: Any) -> None:
    """A reviewer whose credential is revoked and re-added without the role is refused."""
    rules = parse_rules('[tools.issue_refund]\napprovers = ["payments"]\n')
    token = store.add_reviewer("bob", roles=["payments"])
    bob = store.authenticate(token)
    request_id = new_request(store)
    store.revoke_credential(bob.id)
    with pytest.raises(Forbidden):
        store.decide(request_id, reviewer=bob, status="approved", rules=rules)


def test_grant_calls_by_a_removed_reviewer_record_nothing(store: Any) -> None:
    """Giving, approving, revoking and applying a grant all check the credential again."""
    alice = store.authenticate(store.add_reviewer("alice"))
    bob = store.authenticate(store.add_reviewer("bob"))
    first = new_request(store)
    _, grant = store.decide_granting(
        first, reviewer=alice, status="approved", grant=GrantSpec(for_seconds=600)
    )
    assert grant is not None and grant.status == "live"
    second = new_request(store, {**REFUND, "amount": 1})
    store.remove_reviewer("bob")
    with pytest.raises(Forbidden):
        store.decide_granting(
            second, reviewer=bob, status="approved", grant=GrantSpec(for_seconds=600)
        )
    with pytest.raises(Forbidden):
        store.revoke_grant(grant.id, reviewer=bob)
    assert store.get_grant(grant.id).status == "live"
    assert store.list_grants() == [store.get_grant(grant.id)]


def test_a_removed_reviewers_approval_stops_counting_toward_a_quorum(store: Any) -> None:
    """bob approves, is removed, alice approves: still pending, 1 of 2, approved by alice only."""
    alice = store.authenticate(store.add_reviewer("alice"))
    bob = store.authenticate(store.add_reviewer("bob"))
    carol = store.authenticate(store.add_reviewer("carol"))
    request_id = new_request(store, rules=QUORUM)
    store.decide(request_id, reviewer=bob, status="approved", rules=QUORUM)
    assert [one.by for one in store.get_request(request_id).approvals] == ["bob"]
    store.remove_reviewer("bob")
    assert store.get_request(request_id).approvals == ()
    after = store.decide(request_id, reviewer=alice, status="approved", rules=QUORUM)
    assert after.status == "pending"
    assert [one.by for one in after.approvals] == ["alice"]
    done = store.decide(request_id, reviewer=carol, status="approved", rules=QUORUM)
    assert done.status == "approved"
    assert done.decision.decided_by == "alice, carol"


def test_a_new_reviewer_of_a_removed_ones_name_may_approve(store: Any) -> None:
    """The removed bob's counted approval is gone, so a new bob's counts once."""
    old = store.authenticate(store.add_reviewer("bob"))
    alice = store.authenticate(store.add_reviewer("alice"))
    request_id = new_request(store, rules=QUORUM)
    store.decide(request_id, reviewer=old, status="approved", rules=QUORUM)
    store.remove_reviewer("bob")
    new = store.authenticate(store.add_reviewer("bob"))
    store.decide(request_id, reviewer=new, status="approved", rules=QUORUM)
    done = store.decide(request_id, reviewer=alice, status="approved", rules=QUORUM)
    assert done.decision.decided_by == "bob, alice"


def test_a_create_by_an_agent_removed_since_its_token_was_read_is_decided_by_nothing(
    store: Any,
) -> None:
    """An auto-approve rule does not approve a create whose agent was removed meanwhile."""
    rules = parse_rules(
        '[[tools.issue_refund.auto]]\nname = "all"\ndecision = "approve"\nmatch = {}\n'
    )
    robot = store.authenticate(store.add_agent("robot"))
    assert store.remove_agent("robot")
    made = store.create_request(
        owner=robot,
        idempotency_key="k1",
        tool="issue_refund",
        arguments=REFUND,
        timeout_seconds=1800,
        rules=rules,
    )
    assert made.request.status == "pending"
    assert made.request.decision is None
