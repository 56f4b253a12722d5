"""How the command line is reached (``python -m approval_guard``, the console script) and
what it is made of: no HTTP client of its own.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from approval_guard.cli import main
from approval_guard.testing import LocalProvider
from tests.support.cli import cli, create, free_port
from tests.support.paths import REPO


def test_python_dash_m_runs_the_same_cli(provider: LocalProvider) -> None:
    """``python -m approval_guard list`` works in a child process."""
    request_id = create(provider)

    done = cli("list", "--url", provider.url, "--token", provider.reviewer_credential)

    assert (0, "") == (done.returncode, done.stderr)
    assert request_id in done.stdout


def test_python_dash_m_reports_a_missing_provider_with_exit_1() -> None:
    """The child process exits 1 with the one-line hint when nothing listens."""
    url = f"http://127.0.0.1:{free_port()}"

    done = cli("list", "--url", url, "--token", "agr_x")

    assert 1 == done.returncode
    assert f"no provider is answering at {url}" in done.stderr


# What a second HTTP client would import; the CLI sends only through ``_client.ProviderClient``.
HTTP_MODULES = {"requests", "urllib3", "httpx", "aiohttp", "http", "urllib.request", "socket"}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "path", sorted((REPO / "approval_guard" / "cli").glob("*.py")), ids=lambda p: p.name
)
def test_the_cli_has_no_http_client_of_its_own(path: Path) -> None:
    """No CLI module imports an HTTP library: every exchange goes through the library's client."""
    imported = _imported_modules(path)

    assert set() == {
        name
        for name in imported
        for http in HTTP_MODULES
        if name == http or name.startswith(f"{http}.")
    }


def test_the_console_script_runs_the_cli_main() -> None:
    """The approval-guard script names approval_guard.cli:main."""
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    module_name, _, attribute = scripts["approval-guard"].partition(":")

    assert main is getattr(importlib.import_module(module_name), attribute)
