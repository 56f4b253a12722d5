"""The benchmarks still work: CI runs them in quick smoke mode (the figures live in benchmarks/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

NAMES = [
    "latency",
    "requests_per_approval",
    "overhead",
    "scale",
    "provider_alone",
    "policy",
    "server",
]


@pytest.mark.slow
def test_benchmarks_run_in_quick_mode(tmp_path: Path) -> None:
    """`python -m benchmarks --quick` runs every benchmark and writes its JSON and table."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    for name in NAMES:
        result = json.loads((tmp_path / f"{name}.json").read_text())
        assert result["quick"] is True
    assert "| " in (tmp_path / "latest.md").read_text()


def test_the_policy_benchmark_gives_positive_figures(tmp_path: Path) -> None:
    """The when=False and redaction figures exist and are real measurements."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "policy", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads((tmp_path / "policy.json").read_text())["figures"]
    assert figures["bare_seconds_per_call"] > 0
    for name in ("no_otel_repeats_us", "plan_repeats_us"):
        assert all(t > 0 for times in figures[name].values() for t in times)


@pytest.mark.slow
def test_the_server_benchmark_answers_every_poll_and_loses_no_decision(tmp_path: Path) -> None:
    """Every waiting poll (provider and floor) comes back approved; a SIGKILL loses nothing."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "server", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads((tmp_path / "server.json").read_text())["figures"]
    for side in ("provider", "floor"):
        polls = figures["polls"][side]
        assert polls["polls"] == polls["sent"] == polls["approved"] > 0
        assert polls["decisions_ok"] == polls["polls"]
        assert all(rate > 0 for rate in figures["creates_per_second"][side].values())
    assert {"1", "8"} == set(figures["decisions"])
    for reviewers, decisions in figures["decisions"].items():
        assert decisions["reviewers"] == int(reviewers)
        assert (decisions["decisions"], 0) == (decisions["acked"], decisions["lost"])
        assert decisions["per_second"] > 0


@pytest.mark.slow
@pytest.mark.postgres
def test_the_server_benchmark_measures_postgres_writes_and_loses_no_decision(
    tmp_path: Path, pg_dsn: str
) -> None:
    """On PostgreSQL too: creates and decisions per second, and a SIGKILL loses nothing."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "server", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "APPROVAL_GUARD_TEST_DSN": pg_dsn},
    )
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    writes = json.loads((tmp_path / "server.json").read_text())["figures"]["postgres_writes"]
    assert {"1", "8"} == set(writes["creates"]) == set(writes["decisions"])
    assert all(one["per_second"] > 0 for one in writes["creates"].values())
    for reviewers, decisions in writes["decisions"].items():
        assert decisions["reviewers"] == int(reviewers)
        assert (decisions["decisions"], 0) == (decisions["acked"], decisions["lost"])
        assert decisions["per_second"] > 0
