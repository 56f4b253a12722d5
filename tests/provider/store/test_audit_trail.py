"""The audit trail in the store: every action one append-only row, with who, when, from where."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from approval_guard.provider import Store
from approval_guard.provider.store.models import INSTANCE, REVIEWER


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def test_create_edit_cancel_and_expiry_each_leave_one_row() -> None:
    """created, approval with its edit, cancel, expiry (by "system", dated at the deadline)."""
    clock = Clock()
    store = Store(":memory:", clock=clock)
    try:
        owner = store.authenticate(store.create_credential(INSTANCE, "agent-1"))
        reviewer = store.authenticate(store.create_credential(REVIEWER, "erin"))
        assert owner is not None and reviewer is not None

        def create(key: str) -> str:
            assert owner is not None
            return store.create_request(
                owner=owner,
                idempotency_key=key,
                tool="refund",
                arguments={"amount": 10},
                timeout_seconds=60,
                editable=["amount"],
                requested_by="frank",
                source="10.0.0.7",
            ).request.id

        edited, cancelled, expired = create("a"), create("b"), create("c")
        store.decide(
            edited, reviewer=reviewer, status="approved", arguments={"amount": 5}, source="10.0.0.8"
        )
        store.cancel(cancelled, owner=owner, reason="not needed", source="10.0.0.7")
        clock.now += timedelta(seconds=61)
        assert "expired" == store.get_request(expired).status  # type: ignore[union-attr]

        rows = [(r.actor, r.source, r.action, r.request_id) for r in store.audit()]
        assert [
            ("agent-1", "10.0.0.7", "request.created", edited),
            ("agent-1", "10.0.0.7", "request.created", cancelled),
            ("agent-1", "10.0.0.7", "request.created", expired),
            ("erin", "10.0.0.8", "request.approval", edited),
            ("erin", "10.0.0.8", "request.edit", edited),
            ("agent-1", "10.0.0.7", "request.cancel", cancelled),
            ("system", "system", "request.expiry", expired),
        ] == rows
        edit = store.audit(request_id=edited)[-1]
        assert {"amount": {"before": 10, "after": 5}} == edit.detail["edits"]
        expiry = store.audit(request_id=expired)[-1]
        assert datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc) == expiry.at
        assert "frank" == store.audit(request_id=edited)[0].detail["requested_by"]
        since = store.audit(since=datetime(2026, 1, 1, 0, 0, 30, tzinfo=timezone.utc))
        assert ["request.expiry"] == [r.action for r in since]
    finally:
        store.close()
