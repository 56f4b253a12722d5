"""The Claude Agent SDK, imported when the integration is used, with the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def sdk() -> ModuleType:
    """``claude_agent_sdk``, or an ImportError that says which extra brings it."""
    try:
        return importlib.import_module("claude_agent_sdk")
    except ImportError as exc:
        raise ImportError(
            "approval_guard.claude needs the Claude Agent SDK: pip install 'approval-guard[claude]'"
        ) from exc
