"""Hundreds of concurrent long polls: all held, all answered promptly after their decisions."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import threading
import time
import uuid

import pytest
import requests

from approval_guard.testing import LocalProvider

N = 500


@pytest.mark.slow
def test_five_hundred_waiting_polls_are_all_answered_after_decisions() -> None:
    """500 polls wait at once; each returns its decision soon after it is made."""
    with LocalProvider() as provider:
        headers = {"Authorization": f"Bearer {provider.credential}"}
        session = requests.Session()
        ids = []
        for i in range(N):
            response = session.post(
                f"{provider.url}/v1/requests",
                json={"tool": "bulk", "arguments": {"i": i}, "timeout": "10m"},
                headers={**headers, "Idempotency-Key": str(uuid.uuid4())},
                timeout=10,
            )
            ids.append(response.json()["id"])

        answers: dict[str, tuple[str, float]] = {}
        lock = threading.Lock()

        def poll(request_id: str) -> None:
            response = requests.get(
                f"{provider.url}/v1/requests/{request_id}",
                params={"wait": "30s"},
                headers=headers,
                timeout=60,
            )
            with lock:
                answers[request_id] = (response.json()["status"], time.monotonic())

        threads = [threading.Thread(target=poll, args=(rid,), daemon=True) for rid in ids]
        for thread in threads:
            thread.start()
        assert provider.wait_for_polls(N, timeout=20), provider.store.waiting_polls
        assert {} == answers  # all of them are really waiting

        decided_at: dict[str, float] = {}
        for index, request_id in enumerate(ids):
            decided_at[request_id] = time.monotonic()
            if index % 2:
                provider.deny(request_id, "no")
            else:
                provider.approve(request_id)
        for thread in threads:
            thread.join(20)

        assert N == len(answers)
        expected = {rid: "denied" if i % 2 else "approved" for i, rid in enumerate(ids)}
        assert expected == {rid: status for rid, (status, _) in answers.items()}
        # Generous bound: each answer came well within a second of its decision.
        lags = [answers[rid][1] - decided_at[rid] for rid in ids]
        assert max(lags) < 2.0, max(lags)
