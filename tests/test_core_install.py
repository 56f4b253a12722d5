"""The core install (no `server` extra): the decorator works; the server says what to install."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.paths import REPO

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("starlette", "uvicorn", "anyio", "h11", "mcp", "mcp_types"):
            raise ImportError(f"blocked {name}")
        return None
sys.meta_path.insert(0, Block())
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", BLOCK + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def test_the_guard_and_the_store_need_no_web_server() -> None:
    done = _run(
        """
        import approval_guard as ag
        from approval_guard.provider import Store, NotPendingError
        guard = ag.Guard(base_url="http://127.0.0.1:9", credential="x" * 30)
        @guard.requires_approval(timeout="30s", when=lambda args: False)
        def tool(x: int) -> int:
            return x * 2
        assert tool(21) == 42
        Store(":memory:").close()
        assert not any(m.split(".")[0] in ("starlette", "uvicorn") for m in sys.modules)
        print("ok")
        """
    )
    assert "ok" in done.stdout, done.stderr


def test_the_demo_without_the_server_extra_says_what_to_install() -> None:
    done = _run(
        """
        from approval_guard.cli import main
        sys.exit(main(["demo", "--decide", "approve"]))
        """
    )
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "pip install 'approval-guard[server]'" in done.stderr
    assert "Traceback" not in done.stderr


FRAMEWORKS_BLOCKED = """
import sys
BLOCKED = ("claude_agent_sdk", "google.adk", "google.genai", "crewai")
class BlockFrameworks:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(BLOCKED):
            raise ImportError(f"blocked {name}")
        return None
sys.meta_path.insert(0, BlockFrameworks())
"""

AGENT_FRAMEWORKS = ("pydantic_ai", "langchain", "langchain_core", "langgraph", "pydantic")

BLOCK_FRAMEWORKS = f"""
FRAMEWORKS = {AGENT_FRAMEWORKS!r}
class BlockFrameworks:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FRAMEWORKS:
            raise ModuleNotFoundError("No module named " + name, name=name)
        return None
sys.meta_path.insert(0, BlockFrameworks())
"""


def test_the_integrations_import_no_framework_until_used() -> None:
    """Without the claude/adk/crewai extras: everything imports; a use names the extra."""
    code = FRAMEWORKS_BLOCKED + textwrap.dedent(
        """
        import approval_guard as ag
        import approval_guard.adk, approval_guard.claude, approval_guard.crewai
        assert not [m for m in sys.modules if m.startswith(BLOCKED)], "a framework was imported"
        guard = ag.Guard(base_url="http://127.0.0.1:9", credential="x" * 30,
                         allow_insecure_http=True)
        uses = [
            lambda: approval_guard.claude.can_use_tool(guard, tools={"Bash": True}),
            lambda: approval_guard.adk.guarded_tool(lambda: None, guard),
            lambda: approval_guard.adk.before_tool_callback(guard, tools={"t": True}),
            lambda: approval_guard.crewai.guarded(object(), guard),
        ]
        for use in uses:
            try:
                use()
            except ImportError as exc:
                print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    assert 0 == done.returncode, done.stderr
    assert [
        "approval_guard.claude needs the Claude Agent SDK: pip install 'approval-guard[claude]'",
        "approval_guard.adk needs Google ADK: pip install 'approval-guard[adk]'",
        "approval_guard.adk needs Google ADK: pip install 'approval-guard[adk]'",
        "approval_guard.crewai needs CrewAI: pip install 'approval-guard[crewai]'",
    ] == done.stdout.splitlines()


def test_the_core_pulls_in_no_agent_framework() -> None:
    """Without Pydantic AI or LangChain, the guard works and imports neither."""
    done = _run(
        BLOCK_FRAMEWORKS
        + """
import approval_guard as ag
guard = ag.Guard(base_url="http://127.0.0.1:9", credential="x" * 30)
@guard.requires_approval(timeout="30s", when=lambda args: False)
def tool(x: int) -> int:
    return x * 2
assert tool(21) == 42
print(sorted(m for m in sys.modules if m.split(".")[0] in FRAMEWORKS) or "ok")
"""
    )
    assert "ok" == done.stdout.strip(), done.stderr


@pytest.mark.parametrize(
    ("module", "extra"),
    [("approval_guard.pydantic_ai", "pydantic-ai"), ("approval_guard.langchain", "langchain")],
)
def test_an_integration_without_its_framework_says_what_to_install(module: str, extra: str) -> None:
    """Importing an integration whose framework is missing names the extra to install."""
    done = _run(
        BLOCK_FRAMEWORKS
        + f"""
try:
    import {module}
except ModuleNotFoundError as exc:
    print(exc)
"""
    )
    assert f"pip install 'approval-guard[{extra}]'" in done.stdout, done.stderr


def test_the_core_and_the_command_line_import_no_mcp() -> None:
    """Without the mcp extra the package, the mcp_proxy package and the CLI parser still import."""
    done = _run(
        """
        import approval_guard, approval_guard.mcp_proxy
        from approval_guard.cli._parser import build_parser
        rules = approval_guard.mcp_proxy.ProxyRules.parse(guard="write_*")
        assert rules.guards("write_file")
        build_parser()
        assert not any(m.split(".")[0] in ("mcp", "mcp_types", "anyio") for m in sys.modules)
        print("ok")
        """
    )
    assert "ok" in done.stdout, done.stderr


def test_the_mcp_proxy_without_the_mcp_extra_says_what_to_install() -> None:
    """approval-guard mcp-proxy without mcp installed: one line naming the extra, exit 1."""
    done = _run(
        """
        import os
        os.environ["APPROVAL_GUARD_URL"] = "http://127.0.0.1:9"
        os.environ["APPROVAL_GUARD_CREDENTIAL"] = "x" * 30
        from approval_guard.cli import main
        sys.exit(main(["mcp-proxy", "--guard", "*", "--", "some-server"]))
        """
    )
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "pip install 'approval-guard[mcp]'" in done.stderr
    assert "Traceback" not in done.stderr
