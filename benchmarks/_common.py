"""Shared helpers: results, percentiles, tables, process facts, a provider in a child process."""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import platform
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


@dataclass
class Row:
    """One line of a benchmark's table: a figure, its baseline, and the goal."""

    metric: str
    value: str
    baseline: str = ""
    goal: str = ""
    met: bool | None = None

    def cells(self) -> list[str]:
        verdict = "" if self.met is None else ("yes" if self.met else "**no**")
        return [self.metric, self.value, self.baseline, self.goal, verdict]


@dataclass
class Result:
    """What one benchmark measured: a table for people, raw figures for machines."""

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    quick: bool = False
    seconds: float = 0.0
    run: str = ""  # when the ``python -m benchmarks`` that measured it started (UTC)

    def add(
        self,
        metric: str,
        value: str,
        baseline: str = "",
        goal: str = "",
        met: bool | None = None,
    ) -> None:
        self.rows.append(Row(metric, value, baseline, goal, met))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "quick": self.quick,
            "run": self.run,
            "seconds": round(self.seconds, 1),
            "environment": environment(),
            "rows": [row.__dict__ for row in self.rows],
            "figures": self.figures,
            "notes": self.notes,
        }


HEADER = ["metric", "measured", "baseline / reference (same run)", "goal", "met"]


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [
        "| " + " | ".join(HEADER) + " |",
        "|" + "|".join(" --- " for _ in HEADER) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row.cells()) + " |")
    return "\n".join(lines)


def text_table(result: Result) -> str:
    table = [HEADER, *(row.cells() for row in result.rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    out = [f"== {result.title} ({result.seconds:.1f} s{', quick' if result.quick else ''})"]
    for n, line in enumerate(table):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    out.extend(f"  note: {note}" for note in result.notes)
    return "\n".join(out)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), nearest-rank on sorted values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def raise_fd_limit(wanted: int = 8192) -> int:
    """Raise the soft RLIMIT_NOFILE towards ``wanted`` (never above the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return int(soft)


def rss_bytes() -> int:
    """This process's resident set size, from /proc (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_sockets() -> int:
    """How many sockets this process has open (Linux: /proc/self/fd)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(interval)
    return True


def write_result(result: Result, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result.name}.json"
    path.write_text(json.dumps(result.to_json(), indent=2, sort_keys=False) + "\n")
    return path


def write_latest(out: Path, order: Sequence[str]) -> Path:
    """Combine every ``<name>.json`` in ``out`` into ``latest.md``, in ``order``."""
    sections = []
    env: dict[str, Any] | None = None
    for name in order:
        path = out / f"{name}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        env = env or data.get("environment")
        rows = [Row(**row) for row in data["rows"]]
        mode = " (quick smoke run)" if data.get("quick") else ""
        part = [f"### {data['title']}{mode}", "", markdown_table(rows)]
        if data.get("notes"):
            part += ["", *(f"- {note}" for note in data["notes"])]
        sections.append("\n".join(part))
    head = [
        "## Benchmark results",
        "",
        "Produced by `python -m benchmarks` against the local provider on 127.0.0.1; every",
        "figure is measured beside its baseline in the same run.",
    ]
    if env:
        head += [
            "",
            f"Machine: {env['cpus']} CPUs, {env['platform']}, "
            f"{env['implementation']} {env['python']}.",
        ]
    path = out / "latest.md"
    path.write_text("\n".join(head) + "\n\n" + "\n\n".join(sections) + "\n")
    return path


# --------------------------------------------------------------------------- child provider


def _serve(
    conn: multiprocessing.connection.Connection, poll_cap: float, direct: bool, fds: int
) -> None:
    """Run a LocalProvider in this (child) process and obey commands from the parent."""
    raise_fd_limit(fds)
    from approval_guard.testing import LocalProvider

    with LocalProvider(poll_cap=poll_cap) as provider:
        # direct: the server itself, not the fault proxy (a thread per connection).
        url = provider.server.url if direct else provider.url
        conn.send((url, provider.credential, provider.reviewer_credential))
        while True:
            command, args = conn.recv()
            if command == "stop":
                conn.send(None)
                return
            if command == "wait_polls":
                conn.send(provider.wait_for_polls(*args))
            elif command == "wait_waiting":
                conn.send(provider.server.wait_for_waiting_polls(*args))
            elif command == "approve_pending":
                # One burst: approve every pending request, timestamping each just
                # before the store records it (perf_counter is CLOCK_MONOTONIC,
                # shared by every process on the machine).
                decided: dict[str, Any] = {}
                for request in reversed(provider.requests(status="pending")):
                    started = time.perf_counter()
                    provider.approve(request.id, valid_for=args[0])
                    decided[request.id] = (started, request.arguments)
                conn.send(decided)
            elif command == "stats":
                conn.send(provider.stats.snapshot())
            elif command == "threads":
                conn.send(threading.active_count())
            else:
                conn.send(RuntimeError(f"unknown command {command!r}"))


class ChildProvider:
    """A LocalProvider in a child process, so its threads and sockets are not counted as ours."""

    def __init__(self, poll_cap: float = 60.0, *, direct: bool = False, fds: int = 8192) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, poll_cap, direct, fds), daemon=True)
        self._proc.start()
        if not self._conn.poll(60):
            raise RuntimeError("the provider child process did not start")
        self.url, self.credential, self.reviewer_credential = self._conn.recv()
        self._lock = threading.Lock()

    def call(self, command: str, *args: Any, timeout: float = 120.0) -> Any:
        with self._lock:
            self._conn.send((command, args))
            if not self._conn.poll(timeout):
                raise TimeoutError(f"the provider child did not answer {command!r}")
            answer = self._conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, TimeoutError):
            self.call("stop", timeout=10)
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)

    def __enter__(self) -> ChildProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
