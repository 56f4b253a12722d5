"""A two-person rule across channels: one approval by email, one by the API or the review page."""

from __future__ import annotations

from tests.support.mail_team import MailTeam, post_decision, token_of


def test_one_approval_by_email_and_one_by_the_api_approve_a_two_person_request(
    team: MailTeam,
) -> None:
    """alice by email counts 1 of 2; bob on the API completes it; each row names its channel."""
    created = team.instance.new(tool="big_refund")
    token = token_of(team.mail_for(created["id"], "alice@example.com").links()["approve"])
    first = post_decision(team.server.url, created["id"], token)
    assert 200 == first.status_code
    assert "1 of 2" in first.text
    assert "pending" == team.instance.poll(created["id"]).json()["status"]
    second = team.reviewer("bob").decide(created["id"], {"status": "approved"})
    assert 200 == second.status_code, second.text
    final = second.json()
    assert ("approved", "alice, bob") == (final["status"], final["decision"]["decided_by"])
    rows = [r for r in team.store.audit(request_id=created["id"]) if r.action == "request.approval"]
    assert [("alice", "email", "alice@example.com"), ("bob", "api", None)] == [
        (r.actor, r.detail["channel"], r.detail["channel_user"]) for r in rows
    ]


def test_the_same_person_by_email_and_then_the_api_counts_once(team: MailTeam) -> None:
    """alice approves by email, then on the API: 409 already_approved, still 1 of 2."""
    created = team.instance.new(tool="big_refund")
    token = token_of(team.mail_for(created["id"], "alice@example.com").links()["approve"])
    assert 200 == post_decision(team.server.url, created["id"], token).status_code
    again = team.reviewer("alice").decide(created["id"], {"status": "approved"})
    assert 409 == again.status_code
    assert "already_approved" == again.json()["error"]["type"]
    assert 1 == len(team.instance.poll(created["id"]).json()["approvals"])


def test_the_same_person_on_the_api_and_then_by_email_counts_once(team: MailTeam) -> None:
    """alice approves on the API, then by her link: 409, and the link stays unused."""
    created = team.instance.new(tool="big_refund")
    links = team.mail_for(created["id"], "alice@example.com").links()
    assert 200 == team.reviewer("alice").decide(created["id"], {"status": "approved"}).status_code
    refused = post_decision(team.server.url, created["id"], token_of(links["approve"]))
    assert 409 == refused.status_code
    assert "already approved" in refused.text
    assert 1 == len(team.instance.poll(created["id"]).json()["approvals"])
    rows = team.store.list_outbox(channels=["email"], request_id=created["id"])
    (mine,) = [m for m in rows if "alice" in m.target]
    assert not team.store.link_used(mine.id)


def test_one_link_posted_many_times_at_once_decides_once(team: MailTeam) -> None:
    """Eight POSTs of alice's link at the same instant on a two-person request: one counts."""
    import threading

    created = team.instance.new(tool="big_refund")
    token = token_of(team.mail_for(created["id"], "alice@example.com").links()["approve"])
    barrier = threading.Barrier(8)
    codes: list[int] = []

    def post() -> None:
        barrier.wait()
        codes.append(post_decision(team.server.url, created["id"], token).status_code)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [200] + [409] * 7 == sorted(codes)
    final = team.instance.poll(created["id"]).json()
    assert ("pending", ["alice"]) == (final["status"], [a["by"] for a in final["approvals"]])
    rows = team.store.audit(request_id=created["id"])
    assert 1 == [r.action for r in rows].count("request.approval")
