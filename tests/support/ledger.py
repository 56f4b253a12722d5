"""The execution-record tests' helpers: a backend under test, worker processes, specs.

The fixtures that build them live in ``tests/ledger/conftest.py``; the workers
run ``tests/support/ledger_worker.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from approval_guard._ledger.protocol import Ledger
from approval_guard._ledger.sqlite import SQLiteLedger
from approval_guard.cli._parser import add_ledger_commands as register
from tests.support.api import wait_for

WORKER_SCRIPT = Path(__file__).resolve().with_name("ledger_worker.py")


@attrs.define
class Backend:
    """One ledger under test, with what a test needs to reach behind its back."""

    name: str
    ledger: Ledger
    #: JSON-able description another process can build the same record from.
    spec: dict[str, Any]
    #: A second handle on the same record (for memory: the same object).
    reopen: Callable[[], Ledger]
    #: Breaks the record underneath the ledger (drops its table); None if it cannot break.
    sabotage: Callable[[], None] | None = None
    #: A secret the ledger's configuration holds, that must never be shown.
    secret: str | None = None


def make_ledger(spec: dict[str, Any]) -> Ledger:
    """Build a ledger from a spec (the same function lives in ``ledger_worker.py``)."""
    if spec["kind"] == "sqlite":
        return SQLiteLedger(spec["path"])
    from approval_guard._ledger.postgres import PostgresLedger

    return PostgresLedger(spec["dsn"], table=spec["table"])


@attrs.define
class Handles:
    """Second handles on one record (``Backend.reopen``), all closed when the test ends."""

    spec: dict[str, Any]
    opened: list[Ledger] = attrs.field(factory=list)

    def reopen(self) -> Ledger:
        ledger = make_ledger(self.spec)
        self.opened.append(ledger)
        return ledger

    def close(self) -> None:
        for ledger in self.opened:
            ledger.close()  # type: ignore[attr-defined]


def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    path = tmp_path / "ledger.sqlite3"
    spec = {"kind": "sqlite", "path": str(path)}
    ledger = SQLiteLedger(path)

    def sabotage() -> None:
        import sqlite3

        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE executions")

    handles = Handles(spec)
    yield Backend("sqlite", ledger, spec, handles.reopen, sabotage)
    handles.close()
    ledger.close()


def postgres_backend(dsn: str) -> Iterator[Backend]:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from approval_guard._ledger.postgres import PostgresLedger

    # A table per test: tests stay independent and may run against a shared server.
    table = f"ag_test_{uuid.uuid4().hex[:16]}"
    spec = {"kind": "postgres", "dsn": dsn, "table": table}
    ledger = PostgresLedger(dsn, table=table)

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    secret = conninfo_to_dict(dsn).get("password")
    handles = Handles(spec)
    yield Backend("postgres", ledger, spec, handles.reopen, drop, str(secret or ""))
    handles.close()
    ledger.close()
    drop()


@attrs.define
class Workers:
    """Starts worker processes (``ledger_worker.py`` by default) and collects their JSON answers."""

    tmp_path: Path
    running: list[subprocess.Popen[str]] = attrs.field(factory=list)
    #: The worker script: ``ledger_worker.py``, or ``dbos_worker.py`` for DBOS applications.
    script: Path = WORKER_SCRIPT

    def start(self, spec: dict[str, Any]) -> subprocess.Popen[str]:
        """Start one worker on ``spec`` (see ledger_worker.py)."""
        process = subprocess.Popen(
            [sys.executable, str(self.script)],
            env={**os.environ, "AG_WORKER": json.dumps(spec)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.running.append(process)
        return process

    def result(self, process: subprocess.Popen[str], timeout: float = 60) -> dict[str, Any]:
        """Wait for a worker and return its answer; a worker that failed fails the test."""
        out, err = process.communicate(timeout=timeout)
        if process.returncode != 0 or not out.strip():
            pytest.fail(f"worker exited {process.returncode}: {err[-3000:]}", pytrace=False)
        answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return answer

    def race(self, specs: list[dict[str, Any]], timeout: float = 90) -> list[dict[str, Any]]:
        """Start one worker per spec, release them all at one instant, return their answers."""
        barrier = self.tmp_path / f"barrier-{uuid.uuid4().hex[:8]}"
        barrier.mkdir()
        processes = [
            self.start({**spec, "barrier": str(barrier), "index": index})
            for index, spec in enumerate(specs)
        ]

        def ready() -> bool:
            for process in processes:
                if process.poll() is not None:
                    self.result(process)  # fails the test with the worker's stderr
            return len(list(barrier.glob("ready-*"))) >= len(processes)

        wait_for(ready, timeout=timeout, what="workers did not all get ready in time")
        # Far enough ahead that every worker has seen the file before the instant comes.
        go = barrier / "go.tmp"
        go.write_text(repr(time.time() + 0.25))
        go.rename(barrier / "go")
        return [self.result(process, timeout) for process in processes]

    def kill_all(self) -> None:
        """Kill whatever is still running and close every worker's pipes."""
        for process in self.running:
            if process.poll() is None:
                process.kill()
            process.wait()
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()


def guard_spec(backend: Backend | None, provider: Any, tmp_path: Path, key: str) -> dict[str, Any]:
    """A worker spec that calls the guarded tool with idempotency key ``key``."""
    return {
        "mode": "guard",
        "ledger": backend.spec if backend is not None else {"kind": "memory"},
        "url": provider.url,
        "credential": provider.credential,
        "key": key,
        "runs": str(tmp_path / "runs.txt"),
    }


def tool_runs(tmp_path: Path) -> list[str]:
    """The workers that ran the tool, one line each time it ran."""
    runs = tmp_path / "runs.txt"
    return runs.read_text().split() if runs.exists() else []


def provider_rows(ledger: Any, provider: Any) -> Any:
    """``ledger`` as a Guard on ``provider`` sees it: rows by that provider's request ids."""
    from approval_guard._ledger.scoped import ProviderLedger
    from approval_guard._ledger.scoped import provider_scope as _provider_scope

    return ProviderLedger(ledger, _provider_scope(provider.url))


def run(argv: list[str]) -> int:
    """Parse argv with a parser that has only the ledger commands, and run the handler."""
    parser = argparse.ArgumentParser(prog="approval-guard")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code
