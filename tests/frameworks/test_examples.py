"""The framework examples run as the docs show: ``python examples/<name>.py``, no model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.frameworks import require_framework
from tests.support.paths import REPO

EXAMPLES = REPO / "examples"

DENIED = (
    "denied: A person denied this call to issue_refund: refunds over 40 GBP need a manager. "
    "Do not retry the same call: tell the user it was denied, and ask how to go on."
)
REVIEWER_SAW = "reviewer saw: {'amount': 4900, 'payment_id': 'payment_123'}"

CASES = {
    "langchain_tool.py": (
        "langchain_core",
        "approved: refunded 4900 of payment_123 for support-bot",
    ),
    "openai_agents_tool.py": ("agents", "approved: refunded 4900 of payment_123 for support-bot"),
    "mcp_server.py": ("mcp", "approved: refunded 4900 of payment_123 (MCP request "),
    "claude_agent.py": ("claude_agent_sdk", "approved: refunded 4900 of payment_123 (the CLI "),
    "adk_agent.py": ("google.adk", "approved: refunded 4900 of payment_123 for support_bot"),
    "crewai_tool.py": ("crewai", "approved: refunded 4900 of payment_123"),
    "pydantic_ai_agent.py": (
        "pydantic_ai",
        "approved: refunded 4900 of payment_123 for support-bot",
    ),
    "langchain_agent.py": ("langchain", "approved: refunded 4900 of payment_123 for support-bot"),
}


@pytest.mark.parametrize(
    ("example", "framework", "approved"),
    [(name, *case) for name, case in CASES.items()],
    ids=CASES.keys(),
)
def test_example_runs_and_prints_both_outcomes(example: str, framework: str, approved: str) -> None:
    """The example exits 0 and prints the approved result, what was sent, and the denial."""
    require_framework(framework)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    lines = done.stdout.splitlines()
    assert 3 == len(lines), done.stdout
    assert lines[0].startswith(approved)
    assert [REVIEWER_SAW, DENIED] == lines[1:]
