"""A Slack Web API that is slow, or refuses a post for good, holds no item past its time."""

from __future__ import annotations

from pathlib import Path

import pytest

from approval_guard.provider import ProviderServer, SlackSettings
from approval_guard.provider.channels.outbox import lease_for
from approval_guard.provider.channels.slack.channel import SlackChannel
from tests.support.api import Api, wait_for
from tests.support.drip import DripReceiver
from tests.support.fake_slack import SIGNING_SECRET, TOKEN, FakeSlack
from tests.support.slack_clicks import CHANNEL

DEADLINE = 1.5


@pytest.mark.slow  # a hostile receiver held open to its deadline: a fault suite
def test_a_dripping_slack_api_is_cut_at_the_sends_deadline(tmp_path: Path) -> None:
    """One byte every 0.3 s: the post is cut at its deadline (before its lease), then retried."""
    with DripReceiver(every=0.3) as drip:
        settings = SlackSettings(
            bot_token=TOKEN,
            signing_secret=SIGNING_SECRET,
            channel=CHANNEL,
            api_url=drip.url.rsplit("/", 1)[0] + "/",
        )
        channel = SlackChannel(settings)
        channel.deadline = DEADLINE
        assert lease_for([channel]) > DEADLINE
        with ProviderServer(str(tmp_path / "a.db"), channels=[channel]) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            Api(server.url, tokens.instance).new()
            wait_for(lambda: len(drip.connections) >= 1, timeout=15)
            first = drip.connections[0]
            # Cut at the deadline (plus the moment it takes to notice), not left open.
            wait_for(lambda: first.closed is not None, timeout=DEADLINE + 3.0)
            assert first.closed is not None and first.closed - first.opened < DEADLINE + 2.0
            # And tried again, one post at a time.
            wait_for(lambda: len(drip.connections) >= 2, timeout=15)
            assert drip.most_open == 1


def test_an_update_whose_post_was_given_up_is_given_up_too(tmp_path: Path) -> None:
    """The post refused for good (msg_too_long): its update is given up, not retried for a day."""
    with FakeSlack() as slack:
        slack.script = [(200, {"ok": False, "error": "msg_too_long"}, {})]
        settings = SlackSettings(
            bot_token=TOKEN, signing_secret=SIGNING_SECRET, channel=CHANNEL, api_url=slack.api_url
        )
        with ProviderServer(str(tmp_path / "a.db"), slack=settings) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            api = Api(server.url, tokens.instance)
            request_id = api.new()["id"]
            wait_for(
                lambda: server.store.list_outbox(channels=["slack"]),
                lambda rows: [one.state for one in rows] == ["given_up"],
            )
            assert api.cancel(request_id).status_code == 200
            rows = wait_for(
                lambda: server.store.list_outbox(channels=["slack"]),
                lambda rows: len(rows) == 2 and all(one.state == "given_up" for one in rows),
                timeout=10,
            )
    update = next(one for one in rows if one.event_type == "slack.update")
    assert update.attempts <= 2, update
    assert not slack.of("chat.update")


def test_posts_go_through_the_environments_proxy_as_the_sdk_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP(S)_PROXY set (slack_sdk honoured it): the channel's posts go through that proxy."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    with FakeSlack() as proxy:  # it answers as Slack whatever URL it is asked for
        monkeypatch.setenv("HTTP_PROXY", proxy.api_url.rsplit("/api/", 1)[0])
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # the test's own calls
        settings = SlackSettings(
            bot_token=TOKEN,
            signing_secret=SIGNING_SECRET,
            channel=CHANNEL,
            api_url="http://slack.invalid/api/",
        )
        with ProviderServer(str(tmp_path / "a.db"), slack=settings) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            Api(server.url, tokens.instance).new()
            (call,) = proxy.wait_calls("chat.postMessage")
    assert call.body["channel"] == CHANNEL
