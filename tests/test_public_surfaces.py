"""The public surfaces of approval_guard, .provider and .testing are pinned."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

import approval_guard as ag
import approval_guard.adk
import approval_guard.claude
import approval_guard.crewai
import approval_guard.mcp_proxy
import approval_guard.provider
import approval_guard.provider.channels.email
import approval_guard.testing
from tests.support.frameworks import require_framework

PINNED = [
    (approval_guard.claude, ["can_use_tool", "not_run_result"]),
    (approval_guard.adk, ["before_tool_callback", "guarded_tool", "not_run_response"]),
    (approval_guard.crewai, ["guarded"]),
    (approval_guard.mcp_proxy, ["ProxyRules", "run_proxy"]),
    (
        approval_guard.provider,
        [
            "DEFAULT_POLL_CAP",
            "MAX_BODY_BYTES",
            "Credential",
            "FirstStartTokens",
            "IdempotencyKeyInUse",
            "IdempotencyKeyReused",
            "NotPendingError",
            "PostgresStore",
            "ProviderServer",
            "SlackSettings",
            "Store",
            "StoreClosedError",
            "StoreError",
            "StoreProtocol",
            "WebhookSignatureError",
            "WebhookTarget",
            "new_webhook_secret",
            "open_store",
            "verify_webhook",
        ],
    ),
    (
        approval_guard.provider.channels.email,
        ["EmailSettings", "SmtpServer", "email_settings", "parse_smtp_url"],
    ),
    (
        approval_guard.testing,
        [
            "EXCHANGES",
            "FAULT_KINDS",
            "Fault",
            "FaultProxy",
            "FaultRecord",
            "Faults",
            "LocalProvider",
            "Policy",
            "Stats",
            "Timings",
            "approve_after",
            "deny_after",
        ],
    ),
]


@pytest.mark.parametrize(
    ("module", "expected"), PINNED, ids=[module.__name__ for module, _ in PINNED]
)
def test_public_surface_is_pinned(module: ModuleType, expected: list[str]) -> None:
    """A module's __all__ (in ruff's RUF022 order) changes only on purpose."""
    assert expected == module.__all__


@pytest.mark.parametrize(("module", "names"), PINNED, ids=[module.__name__ for module, _ in PINNED])
def test_every_public_name_is_there(module: ModuleType, names: list[str]) -> None:
    """Each name in __all__ can be imported from the module."""
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert [] == missing


#: The integrations' surfaces: (module, the framework it needs, its __all__).
INTEGRATIONS = [
    ("approval_guard.dbos", "dbos", ["DurableGuard", "durable", "step_key"]),
    (
        "approval_guard.pydantic_ai",
        "pydantic_ai",
        ["GuardedToolset", "as_model_retry", "guarded", "resolve_deferred"],
    ),
    ("approval_guard.langchain", "langchain", ["EDIT_NOTICE", "ApprovalMiddleware", "Review"]),
]


@pytest.mark.parametrize(
    ("name", "framework", "expected"), INTEGRATIONS, ids=[name for name, *_ in INTEGRATIONS]
)
def test_an_integration_surface_is_pinned(name: str, framework: str, expected: list[str]) -> None:
    """An integration's __all__ changes only on purpose, and every name in it is there."""
    require_framework(framework)
    module = importlib.import_module(name)
    assert expected == module.__all__
    assert [] == [item for item in module.__all__ if not hasattr(module, item)]


def test_the_package_surface_is_pinned() -> None:
    """approval_guard.__all__ changes only on purpose."""
    assert sorted(ag.__all__) == ag.__all__
    assert ag.__all__ == [
        "ApprovalGuardError",
        "ApprovalSkipped",
        "ArgumentSerializationError",
        "ArgumentsEdited",
        "CallNotRun",
        "Clock",
        "ConfigurationError",
        "Decided",
        "Event",
        "Execution",
        "Guard",
        "HarnessCall",
        "Ledger",
        "LedgerError",
        "MemoryLedger",
        "NotRun",
        "PostgresLedger",
        "Reason",
        "RequestCreated",
        "SQLiteLedger",
        "StillWaiting",
        "SystemClock",
        "ToolFinished",
        "ToolStarted",
        "harness_call",
        "requires_approval",
    ]
