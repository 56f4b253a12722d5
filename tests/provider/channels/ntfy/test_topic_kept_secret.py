"""A reviewer's topic is a secret: another reviewer never reads it from a request's history."""

from __future__ import annotations

import requests

from tests.support.api import wait_for
from tests.support.ntfy_team import NtfyTeam, topic


def test_a_request_history_never_shows_a_reviewers_topic(team: NtfyTeam) -> None:
    """bob reads the history of a request alice decided from her phone: no topic in it."""
    request_id = team.new()
    team.published(request_id, "bob")
    tapped = team.ntfy.tap(team.published(request_id, "alice"), "Approve")
    assert tapped.status == 200, tapped

    def history() -> str:
        answer = requests.get(
            f"{team.server.url}/v1/requests/{request_id}/history",
            headers={"Authorization": f"Bearer {team.tokens['bob']}"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        return answer.text

    # Once the pushes are audited as sent, and the decision through ntfy is in it too.
    text = wait_for(history, lambda found: found.count("ntfy.sent") >= 2, timeout=15)
    assert '"channel": "ntfy"' in text or '"channel":"ntfy"' in text
    for name in ("alice", "bob"):
        assert topic(name) not in text
