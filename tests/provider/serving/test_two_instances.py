"""Several provider instances on one PostgreSQL database, each a real process, over real HTTP.

A decision on one instance wakes a poll waiting on another at once; an
idempotent create raced on two instances makes one request; a deadline
expires exactly once; an instance killed with SIGKILL loses nothing it had
answered.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest
import requests

from tests.support.api import REFUND
from tests.support.fleet import Fleet, Instance

pytestmark = pytest.mark.postgres


def test_a_decision_on_one_instance_wakes_a_poll_waiting_on_another(fleet: Fleet) -> None:
    a, b = fleet.start(), fleet.start()
    created = fleet.api(a).new()
    answers: list[Any] = []
    poll = threading.Thread(
        target=lambda: answers.append(fleet.api(b).poll(created["id"], wait="30s"))
    )
    poll.start()
    time.sleep(0.5)  # the poll is waiting on B
    sent = time.monotonic()
    decided = fleet.api(a, reviewer=True).decide(created["id"], {"status": "approved"})
    assert 200 == decided.status_code, decided.text
    poll.join(10)
    woke = time.monotonic() - sent
    assert "approved" == answers[0].json()["status"]
    assert woke < 1.0  # at once, not at the end of the 30 s wait


def _race(fleet: Fleet, instances: tuple[Instance, ...], key: str) -> list[requests.Response]:
    """The same create sent to every instance at the same moment."""
    barrier = threading.Barrier(len(instances))
    out: list[requests.Response] = []

    def create(instance: Instance) -> None:
        api = fleet.api(instance)
        barrier.wait()
        out.append(api.create(key=key, arguments=REFUND))

    threads = [threading.Thread(target=create, args=(x,)) for x in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return out


def test_an_idempotent_create_raced_on_two_instances_makes_one_request(fleet: Fleet) -> None:
    a, b = fleet.start(), fleet.start()
    for attempt in range(10):
        out = _race(fleet, (a, b), f"race-{attempt}")
        statuses = sorted(response.status_code for response in out)
        assert statuses in ([200, 201], [201, 409]), [r.text for r in out]
        ids = {r.json()["id"] for r in out if r.status_code in (200, 201)}
        assert 1 == len(ids)
    listed = fleet.api(a, reviewer=True).get("/v1/requests").json()["requests"]
    assert 10 == len(listed)


def test_a_deadline_expires_exactly_once_across_instances(fleet: Fleet) -> None:
    a, b = fleet.start(), fleet.start()
    created = fleet.api(a).new(timeout="1s")
    time.sleep(2.5)  # both instances' expiry tasks have passed the deadline
    for instance in (a, b):
        assert "expired" == fleet.api(instance).poll(created["id"]).json()["status"]
    history = fleet.api(b, reviewer=True).get(f"/v1/requests/{created['id']}/history").json()
    assert 1 == [event["type"] for event in history["events"]].count("expired")


@pytest.mark.slow
def test_an_instance_killed_with_sigkill_loses_nothing_it_answered(fleet: Fleet) -> None:
    a, b = fleet.start(), fleet.start()
    instance_api, reviewer_api = fleet.api(a), fleet.api(a, reviewer=True)
    created = [instance_api.new()["id"] for _ in range(20)]
    decided = {}
    for request_id in created[:10]:
        answer = reviewer_api.decide(request_id, {"status": "approved", "note": "ok"})
        assert 200 == answer.status_code
        decided[request_id] = answer.json()["decision"]["decided_at"]
    a.process.send_signal(signal.SIGKILL)
    a.process.wait(10)
    seen = fleet.api(b)
    for request_id in created:
        polled = seen.poll(request_id).json()
        if request_id in decided:
            assert "approved" == polled["status"]
            assert decided[request_id] == polled["decision"]["decided_at"]
        else:
            assert "pending" == polled["status"]


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [200, 320], ids=["mid-burst", "right-after"])
def test_sigkill_in_a_burst_of_decisions_loses_none_it_answered(fleet: Fleet, kill_at: int) -> None:
    """16 reviewer threads decide 320 requests on A (batched), SIGKILL at the 200th or 320th 200:
    B sees every answered decision."""
    a, b = fleet.start(), fleet.start()
    instance_api = fleet.api(a)
    created = [instance_api.new(arguments={"i": i})["id"] for i in range(320)]
    acked: list[str] = []

    def decide_all(mine: list[str]) -> None:
        api = fleet.api(a, reviewer=True)
        for request_id in mine:
            try:
                answer = api.decide(request_id, {"status": "approved"})
            except requests.ConnectionError:
                return  # killed
            if answer.status_code == 200:
                acked.append(request_id)
            if len(acked) >= kill_at and a.process.poll() is None:
                a.process.send_signal(signal.SIGKILL)

    threads = [threading.Thread(target=decide_all, args=(created[t::16],)) for t in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    a.process.wait(10)
    assert len(acked) >= kill_at
    seen = fleet.api(b)
    assert [] == [rid for rid in acked if seen.poll(rid).json()["status"] != "approved"]
