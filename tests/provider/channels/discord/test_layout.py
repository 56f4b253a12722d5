"""Discord is a folder and one registration line: nothing else in the package names it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[4] / "approval_guard"
FOLDER = PACKAGE / "provider" / "channels" / "discord"
REGISTRY = PACKAGE / "provider" / "channels" / "registry.py"
#: Other channels' folders: Discord borrows nothing from them (what it shares is the core's).
SIBLINGS = ("email", "ntfy", "slack", "webhooks")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_only_the_registry_names_discord_outside_its_folder() -> None:
    """No module outside provider/channels/discord/ mentions it, but one line of registry.py."""
    naming = {
        str(path.relative_to(PACKAGE)): [
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if "channels.discord" in line
        ]
        for path in sorted(PACKAGE.rglob("*.py"))
        if FOLDER not in path.parents
    }
    naming = {name: lines for name, lines in naming.items() if lines}
    assert naming == {
        "provider/channels/registry.py": [
            '    "approval_guard.provider.channels.discord:DiscordKind",'
        ]
    }
    assert FOLDER / "__init__.py" in FOLDER.iterdir()


def test_discord_imports_no_other_channel() -> None:
    """Discord's modules use the core (base, decisions, the store, rules), never a sibling."""
    borrowed = {
        str(path.relative_to(FOLDER)): sorted(
            module
            for module in _imports(path)
            if any(module.startswith(f"approval_guard.provider.channels.{one}") for one in SIBLINGS)
        )
        for path in sorted(FOLDER.glob("*.py"))
    }
    assert {name: found for name, found in borrowed.items() if found} == {}
    assert _imports(REGISTRY) >= {"approval_guard.provider.channels.base"}
