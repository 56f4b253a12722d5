"""Approvals in Slack: the local provider posts each request with buttons and hears the clicks."""

from __future__ import annotations

from approval_guard.provider.channels.slack.settings import SlackSettings

__all__ = ["SlackSettings"]
