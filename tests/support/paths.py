"""Where the checkout's own files are, whatever the depth of the module that asks."""

from __future__ import annotations

from pathlib import Path

#: The checkout: ``pyproject.toml``, ``approval_guard/``, ``examples/``, ``docs/``, ``benchmarks/``.
REPO = Path(__file__).resolve().parents[2]
