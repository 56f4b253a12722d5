"""Adding a channel is its folder and one registry line: ntfy and Discord touch nothing else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from approval_guard.provider.channels import registry
from approval_guard.provider.channels.base import ChannelKind

PACKAGE = Path(registry.__file__).resolve().parents[2]
CHANNELS = PACKAGE / "provider" / "channels"
#: The channels added through the interface alone.
ADDED = ("ntfy", "discord")


@pytest.mark.parametrize("name", ADDED)
def test_an_added_channel_is_named_only_in_its_folder_and_one_registry_line(name: str) -> None:
    """Outside provider/channels/NAME/, the package names it on exactly one line: its entry."""
    folder = CHANNELS / name
    assert folder.is_dir(), folder
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if folder in path.parents:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(name, line, re.IGNORECASE):
                found.append((str(path.relative_to(PACKAGE)), line.strip()))
    assert [("provider/channels/registry.py", f'"approval_guard.provider.channels.{name}:')] == [
        (where, line[: len(f'"approval_guard.provider.channels.{name}:')]) for where, line in found
    ], found


@pytest.mark.parametrize("name", ADDED)
def test_an_added_channel_imports_only_the_channels_interface_from_the_provider(name: str) -> None:
    """Its modules reach the rest of the provider only through what every channel may use."""
    allowed = (
        "approval_guard.provider.channels.",
        "approval_guard.provider.store.models",
        "approval_guard.provider.store.protocol",
        "approval_guard.provider.http.context",
        "approval_guard.provider.http.render",
        "approval_guard.provider.rules.",
    )
    for path in sorted((CHANNELS / name).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("approval_guard.provider.")
            ):
                assert (
                    node.module.startswith(allowed) or node.module == "approval_guard.provider"
                ), (
                    path,
                    node.module,
                )


def test_every_registry_line_names_a_channel_kind() -> None:
    """Each entry imports, is a ChannelKind, and names are unique."""
    kinds = registry.kinds()
    assert len(kinds) == len(registry.KINDS)
    assert all(issubclass(kind, ChannelKind) for kind in kinds)
    assert len({kind.name for kind in kinds}) == len(kinds)
    assert {"webhooks", "slack", "email", *ADDED} <= {kind.name for kind in kinds}
