"""ntfy is its folder and one registration line: nothing else in the package knows of it."""

from __future__ import annotations

import ast
from pathlib import Path

from approval_guard.provider.channels import registry
from approval_guard.provider.channels.ntfy import NtfyKind

PACKAGE = Path(__file__).resolve().parents[4] / "approval_guard"
FOLDER = PACKAGE / "provider" / "channels" / "ntfy"
MODULE = "approval_guard.provider.channels.ntfy"


def _mentions(path: Path) -> list[str]:
    """Each import of the ntfy package, and each string naming it, in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(MODULE):
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith(MODULE)]
        elif isinstance(node, ast.Constant) and str(node.value).startswith(MODULE):
            found.append(str(node.value))
    return found


def test_only_the_registry_names_the_ntfy_channel() -> None:
    """Outside its folder, one line of ``registry.py`` is the package's only reference to it."""
    outside = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if FOLDER not in path.parents and (found := _mentions(path))
    }
    assert outside == {"provider/channels/registry.py": [f"{MODULE}:NtfyKind"]}
    assert NtfyKind in registry.kinds()
    assert registry.identities()["ntfy"].flag == "--ntfy-topic"
