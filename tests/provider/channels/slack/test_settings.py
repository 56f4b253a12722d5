"""The Slack app's settings: checked when made, secrets never shown, channels per tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from approval_guard.provider import ProviderServer, SlackSettings
from approval_guard.provider.rules.config import RulesError, parse_rules
from tests.provider.channels.slack.conftest import add_people
from tests.support.api import Api
from tests.support.fake_slack import SIGNING_SECRET, TOKEN, FakeSlack
from tests.support.slack_clicks import CHANNEL


def test_the_repr_never_shows_the_token_or_the_signing_secret() -> None:
    """``repr(SlackSettings(...))`` hides both secrets."""
    shown = repr(SlackSettings(bot_token=TOKEN, signing_secret=SIGNING_SECRET, channel=CHANNEL))
    assert TOKEN not in shown and SIGNING_SECRET not in shown
    assert CHANNEL in shown


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"bot_token": "not-a-token-at-all"}, "starting xox"),
        ({"bot_token": "xoxb-with a space inside"}, "without spaces"),
        ({"signing_secret": "short"}, "signing secret"),
        ({"channel": "general"}, "channel"),
        ({"api_url": "ftp://slack.example/api"}, "Slack API URL"),
    ],
)
def test_a_bad_setting_raises_when_made_without_quoting_a_secret(
    options: dict[str, str], says: str
) -> None:
    """Each bad value is a ValueError at construction; a secret never appears in it."""
    values: dict[str, Any] = {
        "bot_token": TOKEN,
        "signing_secret": SIGNING_SECRET,
        "channel": CHANNEL,
        **options,
    }
    with pytest.raises(ValueError, match=says) as caught:
        SlackSettings(**values)
    assert "with a space" not in str(caught.value) and "short" not in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_the_api_url_gets_its_trailing_slash() -> None:
    """``WebClient(base_url=)`` wants a trailing slash; the settings add it."""
    made = SlackSettings(
        bot_token=TOKEN, signing_secret=SIGNING_SECRET, api_url="http://127.0.0.1:9/api"
    )
    assert "http://127.0.0.1:9/api/" == made.api_url


def test_the_rules_file_sets_a_channel_per_tool() -> None:
    """``slack_channel`` in a tool's table (or [defaults]) picks its channel."""
    rules = parse_rules(
        '[defaults]\nslack_channel = "C0DEFAULT"\n[tools.delete_user]\nslack_channel = "C0ADMINS"\n'
    )
    made = SlackSettings(bot_token=TOKEN, signing_secret=SIGNING_SECRET).with_rules(rules)
    assert ("C0ADMINS", "C0DEFAULT") == (made.channel_for("delete_user"), made.channel_for("x"))


def test_a_bad_rules_file_channel_names_its_line() -> None:
    """A slack_channel that is no channel id is a RulesError at its line."""
    with pytest.raises(RulesError, match=r"rules.toml:3: tools.t.slack_channel"):
        parse_rules('[tools.t]\napprovers = ["a"]\nslack_channel = "general"\n')


def test_a_rules_channel_without_a_slack_app_refuses_to_start(tmp_path: Path) -> None:
    """A rules file naming a slack_channel needs the server's Slack app: ValueError at start."""
    rules = tmp_path / "rules.toml"
    rules.write_text('[tools.t]\nslack_channel = "C0123"\n')
    with pytest.raises(ValueError, match="no Slack app"):
        ProviderServer(":memory:", rules=rules)


def test_a_tools_requests_go_to_its_own_channel(tmp_path: Path) -> None:
    """delete_user is posted to its rules-file channel; other tools to the server's."""
    rules = tmp_path / "rules.toml"
    rules.write_text('[tools.delete_user]\napprovers = ["admin"]\nslack_channel = "C0ADMINS"\n')
    with FakeSlack() as slack:
        settings = SlackSettings(
            bot_token=TOKEN, signing_secret=SIGNING_SECRET, channel=CHANNEL, api_url=slack.api_url
        )
        with ProviderServer(str(tmp_path / "p.sqlite3"), rules=rules, slack=settings) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            add_people(server)
            api = Api(server.url, tokens.instance)
            for tool in ("delete_user", "issue_refund"):
                api.new(body={"tool": tool, "arguments": {}, "timeout": "1m"})
            calls = slack.wait_calls("chat.postMessage", 2)
    assert {"C0ADMINS", CHANNEL} == {call.body["channel"] for call in calls}


def test_no_secret_reaches_a_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Posting, a failing Slack and a forged click log nothing holding the token or secret."""
    caplog.set_level("DEBUG")
    with FakeSlack() as slack:
        slack.script.append((500, {"ok": False, "error": "fatal_error"}, {}))
        settings = SlackSettings(
            bot_token=TOKEN, signing_secret=SIGNING_SECRET, channel=CHANNEL, api_url=slack.api_url
        )
        with ProviderServer(
            str(tmp_path / "p.sqlite3"), slack=settings, webhook_backoff=0.05
        ) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            Api(server.url, tokens.instance).new(
                body={"tool": "t", "arguments": {}, "timeout": "1m"}
            )
            # The retry has reached Slack; the stop below waits for its answer to be handled.
            slack.wait_calls("chat.postMessage", 2)
    logged = caplog.text + repr(server) + repr(settings)
    assert TOKEN not in logged and SIGNING_SECRET not in logged
    assert "fatal_error" in caplog.text  # the failure itself is logged
