"""Importing an optional framework: skipped where it is missing, a failure in CI."""

from __future__ import annotations

import asyncio
import importlib
import os
import warnings
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


def close_loop_left_by_run_sync() -> None:
    """Close the loop Pydantic AI's ``run_sync`` sets as the thread's own and leaves open.

    Left open, it is garbage collected in whichever test comes next: an "unclosed
    event loop" warning blamed on a test that had nothing to do with it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: no current loop
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:  # none set
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)
