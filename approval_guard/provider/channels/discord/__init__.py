"""Discord: each request a message with Approve / Deny… buttons, decided by linked reviewers."""

from approval_guard.provider.channels.discord.channel import DiscordChannel, DiscordKind
from approval_guard.provider.channels.discord.settings import DiscordSettings

__all__ = ["DiscordChannel", "DiscordKind", "DiscordSettings"]
