"""The benchmarks still work: CI runs them in quick smoke mode (the figures live in benchmarks/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["latency", "requests_per_approval", "overhead", "scale", "provider_alone"]


def test_benchmarks_run_in_quick_mode(tmp_path: Path) -> None:
    """`python -m benchmarks --quick` runs every benchmark and writes its JSON and table."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    for name in NAMES:
        result = json.loads((tmp_path / f"{name}.json").read_text())
        assert result["quick"] is True
    assert "| " in (tmp_path / "latest.md").read_text()
