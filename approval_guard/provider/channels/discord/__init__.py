"""Discord: each request a message with Approve / Deny… buttons, decided by linked reviewers."""

from approval_guard.provider.channels.discord.kind import DiscordKind
from approval_guard.provider.channels.discord.settings import DiscordSettings

__all__ = ["DiscordKind", "DiscordSettings"]
