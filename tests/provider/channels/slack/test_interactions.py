"""Deciding from Slack over real HTTP: signed clicks and modals, the same rules as the API."""

from __future__ import annotations

import time
from typing import Any

import approval_guard as ag
from tests.provider.channels.slack.conftest import SlackTeam
from tests.support.fakes import ShiftedClock
from tests.support.guards import in_thread
from tests.support.slack_clicks import block_action, form, post, sign, view_submission

APPROVE, DENY, EDIT = "ag_approve", "ag_deny", "ag_edit"


def _pending_count(team: SlackTeam, request_id: str) -> int:
    return len(team.get(request_id).get("approvals") or [])


def _last_reply(team: SlackTeam, n: int = 1) -> str:
    calls = team.slack.wait_calls("chat.postEphemeral", n)
    return str(calls[n - 1].body["text"])


def test_a_click_approves_and_the_waiting_guarded_call_runs(team: SlackTeam) -> None:
    """Approve in Slack: the guarded call waiting on the provider runs, and the audit says Slack."""
    assert team.instance.token is not None
    guard = ag.Guard(base_url=team.url, credential=team.instance.token, poll_wait="5s")
    ran: list[int] = []

    @guard.requires_approval(timeout="5m")
    def small_refund(payment_id: str, amount: int) -> str:
        ran.append(amount)
        return f"refunded {amount}"

    thread, box = in_thread(lambda: small_refund("payment_9", 700))
    posted = team.slack.wait_calls("chat.postMessage")[0]
    request_id = posted.body["blocks"][-1]["elements"][0]["value"]
    answer = post(team.url, block_action("U0ALICE", APPROVE, request_id))
    assert 200 == answer.status_code
    thread.join(30)
    assert "refunded 700" == box.get("out"), box
    assert [700] == ran
    (row,) = team.decisions(request_id)
    assert ("alice", "slack", "slack", "U0ALICE") == (
        row["actor"],
        row["source"],
        row["detail"]["channel"],
        row["detail"]["channel_user"],
    )


def test_the_decision_is_recorded_and_answered_within_3_seconds_when_slack_is_slow(
    team: SlackTeam,
) -> None:
    """With every Slack call taking 4 s, the click is answered in well under 3 s, recorded."""
    made = team.new()
    team.slack.wait_calls("chat.postMessage")
    team.slack.delay = 4.0
    began = time.monotonic()
    answer = post(team.url, block_action("U0ALICE", APPROVE, made["id"]))
    took = time.monotonic() - began
    assert 200 == answer.status_code
    assert took < 3.0, took
    assert "approved" == team.get(made["id"])["status"]
    team.slack.delay = 0.0


def test_max_valid_for_bounds_a_slack_approval(team: SlackTeam) -> None:
    """small_refund's rule says max_valid_for = 2m: a Slack approval is valid 2 minutes."""
    from approval_guard._codec.wire import parse_timestamp

    made = team.new()
    post(team.url, block_action("U0BOB", APPROVE, made["id"]))
    decision = team.get(made["id"])["decision"]
    valid = parse_timestamp(decision["expires_at"], field="e") - parse_timestamp(
        decision["decided_at"], field="d"
    )
    assert 120 == valid.total_seconds()


def test_a_forged_signature_is_refused_and_records_nothing(team: SlackTeam) -> None:
    """A body signed with another secret is 401, and the request stays pending."""
    made = team.new()
    answer = post(team.url, block_action("U0ALICE", APPROVE, made["id"]), secret="x" * 32)
    assert 401 == answer.status_code
    assert "pending" == team.get(made["id"])["status"]
    assert [] == team.decisions(made["id"])


def test_a_stale_timestamp_is_refused_and_records_nothing(team: SlackTeam) -> None:
    """A correctly signed request six minutes old is 401 (Slack's five-minute rule)."""
    made = team.new()
    old = int(time.time()) - 6 * 60
    answer = post(team.url, block_action("U0ALICE", APPROVE, made["id"]), timestamp=old)
    assert 401 == answer.status_code
    assert "pending" == team.get(made["id"])["status"]


def test_malformed_signature_headers_are_401_never_500(team: SlackTeam) -> None:
    """A timestamp that is no number, or a signature of another shape, is refused, not a crash."""
    made = team.new()
    body = form(block_action("U0ALICE", APPROVE, made["id"]))
    for timestamp, signature in (("soon", sign(body, 1)), ("1", "v0=zz"), ("", "")):
        answer = post(team.url, body=body, timestamp=None, signature=signature)
        assert 401 == answer.status_code
        del timestamp
    answer = post(team.url, body=body, signature="v1=" + "0" * 64)
    assert 401 == answer.status_code
    assert "pending" == team.get(made["id"])["status"]


def test_a_replayed_payload_records_no_second_decision(team: SlackTeam) -> None:
    """The same signed body sent again (within 5 minutes) is acknowledged and does nothing."""
    made = team.new("issue_refund")
    body = form(block_action("U0ALICE", APPROVE, made["id"]))
    stamp = int(time.time())
    first = post(team.url, body=body, timestamp=stamp)
    again = post(team.url, body=body, timestamp=stamp)
    assert (200, 200) == (first.status_code, again.status_code)
    assert 1 == _pending_count(team, made["id"])
    assert 1 == len(team.decisions(made["id"]))
    team.slack.wait_calls("chat.postEphemeral")  # the first click's reply
    # A reply is a background task after the answer, and leaves no record when none is
    # sent: only a window shows the replay sent none (docs/reliability.md).
    time.sleep(0.3)
    assert 1 == len(team.slack.of("chat.postEphemeral"))


def test_an_unknown_slack_user_is_refused_and_told_so(team: SlackTeam) -> None:
    """A Slack user linked to nobody records nothing and hears how to get linked."""
    made = team.new()
    assert 200 == post(team.url, block_action("U0STRANGER", APPROVE, made["id"])).status_code
    assert "not linked to a reviewer" in _last_reply(team)
    assert "pending" == team.get(made["id"])["status"]


def test_a_removed_reviewer_is_refused(team: SlackTeam) -> None:
    """Removing a reviewer makes their Slack link refuse at once."""
    made = team.new()
    assert team.server.store.remove_reviewer("alice")
    post(team.url, block_action("U0ALICE", APPROVE, made["id"]))
    assert "not linked to a reviewer" in _last_reply(team)
    assert [] == team.decisions(made["id"])


def test_a_role_without_permission_is_refused(team: SlackTeam) -> None:
    """carol (admin) may not approve a refund (payments), from Slack as on the API."""
    made = team.new()
    api = team.reviewer("carol").decide(made["id"], {"status": "approved"})
    assert 403 == api.status_code
    post(team.url, block_action("U0CAROL", APPROVE, made["id"]))
    assert "needs the role payments" in _last_reply(team)
    assert [] == team.decisions(made["id"])


def test_self_approval_is_refused(team: SlackTeam) -> None:
    """The person the agent acts for may not approve their own request from Slack."""
    made = team.new(requested_by="alice")
    post(team.url, block_action("U0ALICE", APPROVE, made["id"]))
    assert "may not approve it themselves" in _last_reply(team)
    assert "pending" == team.get(made["id"])["status"]


def test_a_double_click_counts_once(team: SlackTeam) -> None:
    """Two clicks by one person (two payloads) count one approval; the second is told so."""
    made = team.new("issue_refund")
    post(team.url, block_action("U0ALICE", APPROVE, made["id"]))
    post(team.url, block_action("U0ALICE", APPROVE, made["id"]))
    # Each reply is sent after its answer, in the thread pool: they may arrive either way round.
    replies = [str(call.body["text"]) for call in team.slack.wait_calls("chat.postEphemeral", 2)]
    assert 1 == sum("already approved" in reply for reply in replies), replies
    assert 1 == _pending_count(team, made["id"])
    assert 1 == len(team.decisions(made["id"]))


def test_a_click_after_expiry_says_no_longer_pending(
    team: SlackTeam, provider_clock: ShiftedClock
) -> None:
    """A click on an expired request's message records nothing and says when it expired."""
    made = team.new(timeout="1s")
    provider_clock.advance(1.3)  # the provider's time: its deadline has passed
    post(team.url, block_action("U0ALICE", APPROVE, made["id"]))
    assert "no longer pending (expired at" in _last_reply(team)
    assert "expired" == team.get(made["id"])["status"]
    assert [] == team.decisions(made["id"])


def test_two_person_rule_with_one_approval_from_slack_and_one_from_the_page(
    team: SlackTeam,
) -> None:
    """alice approves in Slack, bob on the review page: the request is approved by both."""
    made = team.new("issue_refund")
    post(team.url, block_action("U0ALICE", APPROVE, made["id"]))
    assert "1 of 2: alice" in _last_reply(team)
    assert "pending" == team.get(made["id"])["status"]
    page = team.reviewer("bob").session.post(
        f"{team.url}/review/requests/{made['id']}/decision",
        json={"status": "approved"},
        headers=team.reviewer("bob").headers(),
        timeout=10,
    )
    assert 200 == page.status_code, page.text
    done = team.get(made["id"])
    assert ("approved", "alice, bob") == (done["status"], done["decision"]["decided_by"])
    channels = [(row["actor"], row["detail"]["channel"]) for row in team.decisions(made["id"])]
    assert [("alice", "slack"), ("bob", "page")] == channels


def _open_modal(team: SlackTeam, action: str, request_id: str, user: str = "U0ALICE") -> Any:
    before = len(team.slack.of("views.open"))
    post(team.url, block_action(user, action, request_id))
    opened = team.slack.wait_calls("views.open", before + 1)[-1]
    assert "12345.98765.abcd2358fdea" == opened.body["trigger_id"]
    return opened.body["view"]


def test_deny_opens_a_modal_and_its_reason_reaches_the_agent(team: SlackTeam) -> None:
    """Deny… opens a modal; submitting it denies with the typed reason."""
    made = team.new()
    view = _open_modal(team, DENY, made["id"])
    assert "pending" == team.get(made["id"])["status"]
    answer = post(team.url, view_submission("U0BOB", view, {"reason": "Duplicate of re_7"}))
    assert 200 == answer.status_code
    done = team.get(made["id"])
    assert ("denied", "Duplicate of re_7", "bob") == (
        done["status"],
        done["decision"]["note"],
        done["decision"]["decided_by"],
    )


def test_a_deny_modal_with_no_reason_records_nothing(team: SlackTeam) -> None:
    """An empty reason is shown as an error in the modal, and nothing is recorded."""
    made = team.new()
    view = _open_modal(team, DENY, made["id"])
    answer = post(team.url, view_submission("U0BOB", view, {"reason": "  "}))
    assert "errors" == answer.json()["response_action"]
    assert "pending" == team.get(made["id"])["status"]


def test_edit_and_approve_parses_values_exactly_as_the_page(team: SlackTeam) -> None:
    """The edit modal fills in each editable value as JSON; a typed big integer stays exact."""
    made = team.new(editable=["amount"])
    view = _open_modal(team, EDIT, made["id"])
    (field,) = [b for b in view["blocks"] if b["type"] == "input" and b["block_id"] == "arg0"]
    assert ("amount", "4900") == (field["label"]["text"], field["element"]["initial_value"])
    post(team.url, view_submission("U0ALICE", view, {"arg0": "9007199254740993"}))
    done = team.instance.poll(made["id"]).text
    assert '"amount":9007199254740993' in done.replace(" ", "")
    assert '"status":"approved"' in done.replace(" ", "")


def test_an_edit_that_is_not_json_is_shown_in_the_modal_and_records_nothing(
    team: SlackTeam,
) -> None:
    """Text that is not JSON is refused in the modal, by the page's own parser."""
    made = team.new(editable=["amount"])
    view = _open_modal(team, EDIT, made["id"])
    answer = post(team.url, view_submission("U0ALICE", view, {"arg0": "twenty"}))
    body = answer.json()
    assert "errors" == body["response_action"]
    assert "is not JSON" in body["errors"]["arg0"]
    assert "pending" == team.get(made["id"])["status"]


def test_a_modal_is_not_opened_for_someone_who_may_not_decide(team: SlackTeam) -> None:
    """carol's Deny… click opens no modal: she is told why at once."""
    made = team.new()
    post(team.url, block_action("U0CAROL", DENY, made["id"]))
    assert "needs the role payments" in _last_reply(team)
    assert [] == team.slack.of("views.open")


def test_a_request_without_slack_is_404(tmp_path: Any) -> None:
    """A provider without a Slack app has no interactions endpoint."""
    from approval_guard.provider import ProviderServer

    with ProviderServer(str(tmp_path / "p.sqlite3")) as server:
        answer = post(server.url, {"type": "block_actions"})
    assert 404 == answer.status_code
