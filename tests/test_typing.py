"""Decorated functions keep their types for mypy (ParamSpec), NotRun in the return type."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

SNIPPET = """
from typing import Any, Coroutine
from typing_extensions import assert_type
import approval_guard as ag

guard = ag.Guard(base_url="http://127.0.0.1:1", credential="x")

@guard.requires_approval(timeout="30m")
def refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, int]:
    return {}

@guard.requires_approval(timeout="30m", on_not_run=str)
def plain(payment_id: str) -> int:
    return 1

@guard.requires_approval
async def lookup(order_id: str) -> int:
    return 1

assert_type(refund("p", 1), "dict[str, int] | ag.NotRun")
assert_type(plain("p"), "int | str")
pending = assert_type(lookup("o"), "Coroutine[Any, Any, int | ag.NotRun]")
pending.close()
refund("p", "not an int")  # E: the parameters are the tool's
"""


@pytest.mark.slow
def test_decorated_functions_keep_their_types(tmp_path: Path) -> None:
    """mypy sees the tool's own parameters and a NotRun (or on_not_run's type) in the result."""
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET)
    out, err, status = api.run(
        [str(source), "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache")]
    )
    lines = [line for line in out.splitlines() if ": error:" in line]
    assert 1 == len(lines), out + err
    bad_line = next(
        number for number, line in enumerate(SNIPPET.splitlines(), start=1) if "not an int" in line
    )
    assert f"snippet.py:{bad_line}:" in lines[0] and "refund" in lines[0]
    assert 1 == status
