"""Importing an optional framework: skipped where it is missing, a failure in CI."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require_framework(module: str) -> ModuleType:
    """Import ``module`` for a test module; without it, skip locally but fail under ``CI``.

    CI installs the ``frameworks`` extra, so there a missing framework is a broken
    environment, not a reason to skip the tests that prove the integration works.
    """
    if not os.environ.get("CI"):
        found: ModuleType = pytest.importorskip(module)
        return found
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(
            f"{module} is not installed, but CI must run the framework tests: install "
            f"the 'frameworks' extra ({exc})",
            pytrace=False,
        )
