"""The README's benchmark table: the headline figures of one run, each beside its floor.

``python -m benchmarks`` (a full run, not ``--quick`` or ``--only``) rewrites the
table between the README's markers from the results it has just written;
``python -m benchmarks --readme`` rewrites it from the committed results. The
table is refused (nothing is written) unless every figure in it comes from the
same run, so it never mixes machines or hours.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ._common import RESULTS

README = Path(__file__).parent.parent / "README.md"
START = "<!-- benchmarks:start -->"
END = "<!-- benchmarks:end -->"


@dataclass(frozen=True)
class Pick:
    """One headline line: a row of a benchmark's own table, shown under a short label."""

    benchmark: str
    metric: str  # how the row's metric starts, as the benchmark names it
    label: str
    ending: str = ""  # and how it ends, where the start is not enough


PICKS: tuple[Pick, ...] = (
    Pick("async_scale", "the start:", "async calls created and waiting in one process"),
    Pick("async_scale", "threads added while they wait", "threads added while they wait"),
    Pick("async_scale", "memory per waiting call (RSS)", "memory per waiting async call"),
    Pick("async_scale", "slowest decision -> tool start", "slowest decision -> async tool start"),
    Pick(
        "server",
        "decisions recorded per second",
        "decisions/s (SQLite), 1 reviewer",
        ending="1 reviewer connection",
    ),
    Pick(
        "server",
        "decisions recorded per second",
        "decisions/s (SQLite), 8 reviewers",
        ending="8 reviewer connections",
    ),
    Pick("overhead", "guard overhead per call", "guard overhead, network removed"),
    Pick("server", "PostgreSQL: decision on A -> poll on B", "cross-instance wake (PostgreSQL)"),
    Pick("grants", "granted call: create sent", "granted call: create sent -> tool starts, p50"),
    Pick("grants", "create p50 with", "create p50 among 10,000 live grants on the tool"),
)


class MixedRuns(ValueError):
    """The headline figures do not all come from one run, or one is missing."""


def _load(results: Path, name: str) -> dict[str, object]:
    path = results / f"{name}.json"
    if not path.exists():
        raise MixedRuns(f"{path} is missing: run `python -m benchmarks` first")
    data: dict[str, object] = json.loads(path.read_text())
    return data


def headline(results: Path = RESULTS) -> str:
    """The markdown table (and its one-line source) for the README, from ``results``."""
    loaded = {pick.benchmark: _load(results, pick.benchmark) for pick in PICKS}
    runs = {str(data.get("run")) for data in loaded.values()}
    if len(runs) != 1 or "None" in runs:
        raise MixedRuns(f"the headline figures come from different runs: {sorted(runs)}")
    if any(data.get("quick") for data in loaded.values()):
        raise MixedRuns("a quick smoke run has no figures for the README")
    lines = [
        "| | measured | floor / baseline (same run) | goal | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    for pick in PICKS:
        rows = loaded[pick.benchmark]["rows"]
        assert isinstance(rows, list)
        row = next(
            (
                r
                for r in rows
                if str(r["metric"]).startswith(pick.metric)
                and str(r["metric"]).endswith(pick.ending)
            ),
            None,
        )
        if row is None:
            raise MixedRuns(f"{pick.benchmark} has no row {pick.metric!r}...{pick.ending!r}")
        met = "" if row["met"] is None else ("yes" if row["met"] else "**no**")
        cells = [pick.label, row["value"], row["baseline"], row["goal"], met]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    env = next(iter(loaded.values()))["environment"]
    assert isinstance(env, dict)
    source = (
        f"One run of `python -m benchmarks` ({runs.pop()}, {env['cpus']} CPUs, "
        f"{env['implementation']} {env['python']}); every figure beside its reference "
        "from the same run. Details: [docs/benchmarks.md](docs/benchmarks.md)."
    )
    return "\n".join(lines) + "\n\n" + source


def write_readme(results: Path = RESULTS, readme: Path = README) -> Path:
    """Put the headline table between the README's markers (refused for mixed runs)."""
    text = readme.read_text()
    block = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not block.search(text):
        raise MixedRuns(f"{readme} has no {START} ... {END} block")
    table = headline(results)
    readme.write_text(block.sub(lambda _: f"{START}\n{table}\n{END}", text, count=1))
    return readme


def readme_block(readme: Path = README) -> str:
    """What the README holds between its markers now."""
    text = readme.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    return text[start:end].strip("\n")
