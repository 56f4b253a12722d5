"""What a server talks to Slack with: the app's token and signing secret, channels, the API URL.

One Slack app per provider: its bot token (``xoxb-...``), its signing secret
and the Web API's base URL are the server's; the channel a request is posted
to is the tool's ``slack_channel`` in the rules file, else the server's
``--slack-channel``. The secrets come from the command line or, better,
from ``APPROVAL_GUARD_SLACK_BOT_TOKEN`` / ``APPROVAL_GUARD_SLACK_SIGNING_SECRET``;
neither is ever shown in a repr, a log line or an error.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from typing import ClassVar

import attrs

from approval_guard._env import ENV_SLACK_BOT_TOKEN, ENV_SLACK_SIGNING_SECRET
from approval_guard.provider.channels.base import ChannelKind, Identity
from approval_guard.provider.channels.webhooks.signing import check_url
from approval_guard.provider.rules.config import NO_RULES, SLACK_CHANNEL, Rules

#: Slack's Web API (what ``WebClient`` calls by default).
SLACK_API_URL = "https://slack.com/api/"
_SECRET_TEXT = re.compile(r"[\x21-\x7e]+")


def _hidden(_: object) -> str:
    return "'***'"


def _check_secret(value: object, what: str, low: int, prefix: str = "") -> str:
    # The message never quotes the value: it is a secret.
    if (
        not isinstance(value, str)
        or not low <= len(value) <= 512
        or not _SECRET_TEXT.fullmatch(value)
        or not value.startswith(prefix)
    ):
        start = f", starting {prefix}" if prefix else ""
        raise ValueError(
            f"the Slack {what} must be {low} to 512 printable ASCII characters without spaces"
            f"{start} (the value is not shown)"
        )
    return value


def check_channel(value: object) -> str:
    """A channel id (``C0123ABC``) or ``#name``; ``ValueError`` otherwise."""
    if not isinstance(value, str) or not SLACK_CHANNEL.fullmatch(value):
        raise ValueError(f"a Slack channel is an id such as C0123ABC (or #name), not {value!r}")
    return value


def check_api_url(value: object) -> str:
    """The Web API's base URL, ending in ``/`` (as ``WebClient(base_url=)`` wants it)."""
    try:
        if not isinstance(value, str):
            raise ValueError
        return check_url(value).rstrip("/") + "/"
    except ValueError:
        raise ValueError("the Slack API URL must be an http(s)://HOST/... URL") from None


@attrs.frozen
class SlackSettings:
    """A server's Slack app: ``SlackSettings(bot_token=..., signing_secret=..., channel="C...")``.

    :param bot_token: the app's bot token (``xoxb-...``; scopes ``chat:write``).
    :param signing_secret: the app's signing secret (Basic Information page).
    :param channel: where every tool's requests are posted, unless the rules
        file names another ``slack_channel`` for a tool (None: only those).
    :param api_url: the Web API's base URL (a local fake Slack in tests).
    """

    bot_token: str = attrs.field(repr=_hidden)
    signing_secret: str = attrs.field(repr=_hidden)
    channel: str | None = None
    api_url: str = SLACK_API_URL
    #: Which channel a tool's requests go to: the rule's, else :attr:`channel`.
    rules: Rules = attrs.field(default=NO_RULES, repr=False)

    def __attrs_post_init__(self) -> None:
        _check_secret(self.bot_token, "bot token", 10, "xox")
        _check_secret(self.signing_secret, "signing secret", 8)
        if self.channel is not None:
            check_channel(self.channel)
        object.__setattr__(self, "api_url", check_api_url(self.api_url))

    def channel_for(self, tool: str) -> str | None:
        """The channel ``tool``'s requests are posted to (None: not posted)."""
        return self.rules.for_tool(tool).slack_channel or self.channel

    def with_rules(self, rules: Rules) -> SlackSettings:
        """These settings with the rules file's per-tool channels."""
        return attrs.evolve(self, rules=rules)


def rule_channels(rules: Rules) -> list[str]:
    """Every ``slack_channel`` a rules file names."""
    return sorted(
        {
            rule.slack_channel
            for rule in [rules.defaults, *rules.tools.values()]
            if rule.slack_channel
        }
    )


def slack_settings(slack: SlackSettings | None, rules: Rules) -> SlackSettings | None:
    """``ProviderServer(slack=)`` with its rules file; ``ValueError`` for a rule without an app.

    A rules file naming a ``slack_channel`` needs the app's token and signing
    secret given to the server.
    """
    if slack is None:
        if rule_channels(rules):
            raise ValueError(
                "the rules file names a slack_channel, but the server has no Slack app: give "
                "--slack-bot-token and --slack-signing-secret (or their environment variables)"
            )
        return None
    if not isinstance(slack, SlackSettings):
        raise TypeError(f"slack must be SlackSettings, not {type(slack).__name__}")
    return slack.with_rules(rules)


# ---------------------------------------------------------------------- command lines


#: A Slack user id as Slack writes it: ``U0123ABC`` (or ``W...`` on Enterprise Grid).
SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,30}")


def check_slack_user(value: str) -> str:
    """A Slack user id (``U0123ABC``); ``ValueError`` for anything else."""
    if not isinstance(value, str) or not SLACK_USER.fullmatch(value):
        raise ValueError(
            "a Slack user id is U or W and 2 to 30 capital letters or digits, such as U0123ABC "
            "(Slack: the person's profile, More, Copy member ID)"
        )
    return value


class SlackKind(ChannelKind):
    """Slack: its serve flags, and a reviewer's Slack user id (``--slack-user``)."""

    name: ClassVar[str] = "slack"
    identity: ClassVar[Identity | None] = Identity(
        kind="slack", flag="--slack-user", metavar="U...", check=check_slack_user
    )
    env: ClassVar[tuple[str, ...]] = (ENV_SLACK_BOT_TOKEN, ENV_SLACK_SIGNING_SECRET)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
        add_slack_arguments(parser, env)


def add_slack_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """``--slack-bot-token``, ``--slack-signing-secret``, ``--slack-channel`` and the API URL."""
    parser.add_argument(
        "--slack-bot-token",
        metavar="TOKEN",
        default=env.get(ENV_SLACK_BOT_TOKEN) or None,
        help=f"the Slack app's bot token, xoxb-... (better: ${ENV_SLACK_BOT_TOKEN})",
    )
    parser.add_argument(
        "--slack-signing-secret",
        metavar="SECRET",
        default=env.get(ENV_SLACK_SIGNING_SECRET) or None,
        help=f"the Slack app's signing secret (better: ${ENV_SLACK_SIGNING_SECRET})",
    )
    parser.add_argument(
        "--slack-channel",
        metavar="CHANNEL",
        default=None,
        help="post every request to this Slack channel (id C0123ABC) with Approve / Deny buttons",
    )
    parser.add_argument(
        "--slack-api-url",
        metavar="URL",
        default=None,
        help=f"the Slack Web API's base URL (default {SLACK_API_URL}; a fake Slack in tests)",
    )


def settings_from_args(args: argparse.Namespace, rules: Rules = NO_RULES) -> SlackSettings | None:
    """The Slack app :func:`add_slack_arguments` read, or None; ``ValueError`` for a bad one.

    Slack is on when ``--slack-channel`` is given or the rules file names a
    ``slack_channel``; both secrets are then required. A token or secret from
    the environment alone, with no channel anywhere, leaves Slack off.
    """
    token = getattr(args, "slack_bot_token", None)
    secret = getattr(args, "slack_signing_secret", None)
    channel = getattr(args, "slack_channel", None)
    api_url = getattr(args, "slack_api_url", None)
    if channel is None and not rule_channels(rules):
        if api_url is not None:
            raise ValueError(
                "--slack-api-url needs --slack-channel (or a rules-file slack_channel)"
            )
        return None
    missing = [
        f"--slack-{name} (or ${env})"
        for name, env, value in (
            ("bot-token", ENV_SLACK_BOT_TOKEN, token),
            ("signing-secret", ENV_SLACK_SIGNING_SECRET, secret),
        )
        if not value
    ]
    if missing:
        raise ValueError(f"Slack needs {' and '.join(missing)}")
    return SlackSettings(
        bot_token=str(token),
        signing_secret=str(secret),
        channel=None if channel is None else check_channel(channel),
        api_url=SLACK_API_URL if api_url is None else api_url,
        rules=rules,
    )
