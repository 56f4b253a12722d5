"""The README's benchmark table is the committed results' headline, all from one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import _headline
from benchmarks._common import RESULTS


def test_the_readme_table_is_the_committed_results_headline() -> None:
    """What the README shows is exactly what the committed results say, nothing typed by hand."""
    assert _headline.readme_block() == _headline.headline(RESULTS)


def _results(tmp_path: Path, runs: dict[str, str]) -> Path:
    for name in {pick.benchmark for pick in _headline.PICKS}:
        data = json.loads((RESULTS / f"{name}.json").read_text())
        data["run"] = runs.get(name, "2026-01-01 00:00 UTC")
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    return tmp_path


def test_figures_from_two_runs_are_refused_and_the_readme_is_left_alone(tmp_path: Path) -> None:
    """A table mixing runs is never written: the README keeps what it had."""
    readme = tmp_path / "README.md"
    before = f"intro\n{_headline.START}\nold\n{_headline.END}\nrest\n"
    readme.write_text(before)
    results = _results(tmp_path, {"overhead": "2026-02-02 00:00 UTC"})
    with pytest.raises(_headline.MixedRuns, match="different runs"):
        _headline.write_readme(results, readme)
    assert before == readme.read_text()


def test_a_quick_run_is_refused(tmp_path: Path) -> None:
    """Smoke-run figures never reach the README."""
    results = _results(tmp_path, {})
    data = json.loads((results / "server.json").read_text())
    data["quick"] = True
    (results / "server.json").write_text(json.dumps(data))
    with pytest.raises(_headline.MixedRuns, match="quick"):
        _headline.headline(results)


def test_one_run_replaces_only_the_block(tmp_path: Path) -> None:
    """The table goes between the markers; the text around them is kept."""
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{_headline.START}\nold\n{_headline.END}\nrest\n")
    _headline.write_readme(_results(tmp_path, {}), readme)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("\nrest\n") and "old" not in text
    assert _headline.headline(tmp_path) == _headline.readme_block(readme)
