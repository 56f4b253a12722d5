"""A provider served on a SQLite file in its own process, approved over the reviewer API.

As ``approval-guard serve`` runs it (``python -m approval_guard.provider.serving.process``,
the server benchmark's entry point): the benchmark reads how many requests are
pending straight from the database file (read-only, WAL), and a burst of
approvals goes over the reviewer API on a few keep-alive connections from
another process, as the server benchmark's reviewers do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import multiprocessing
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from ._server_load import approve_all
from ._server_process import ServerProcess

PROVIDER = ["-m", "approval_guard.provider.serving.process"]
#: Reviewer connections approving at once (as the server benchmark's).
REVIEWERS = 8


def _approve(url: str, token: str, ids: list[str]) -> dict[str, tuple[float, float, int]]:
    """(In a child process.) Approve every id over the reviewer API."""
    return asyncio.run(approve_all(url, token, ids, REVIEWERS))


class View:
    """What a benchmark process needs of a served provider (picklable: no process handle)."""

    def __init__(self, url: str, credential: str, reviewer: str, db: Path, pid: int) -> None:
        self.url = url
        self.credential = credential
        self.reviewer = reviewer
        self.db = db
        self.pid = pid

    def _query(self, sql: str) -> list[Any]:
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        try:
            return db.execute(sql).fetchall()
        finally:
            db.close()

    def pending(self) -> dict[str, int]:
        """Pending request id -> the ``n`` argument it was created with."""
        rows = self._query("SELECT id, arguments FROM requests WHERE status = 'pending'")
        return {rid: int(json.loads(arguments).get("n", -1)) for rid, arguments in rows}

    def wait_pending(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` requests are pending; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            (count,) = self._query("SELECT COUNT(*) FROM requests WHERE status = 'pending'")[0]
            if count >= n:
                return True
            time.sleep(0.2)
        return False

    def _cpu(self) -> float:
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def settle(self, timeout: float = 60.0, window: float = 0.5) -> bool:
        """Wait until the server has stopped using the CPU (every poll is held, nothing more)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            before = self._cpu()
            time.sleep(window)
            if self._cpu() - before < 0.05 * window:
                return True
        return False

    def approve(self, ids: list[str]) -> dict[str, tuple[float, float, int]]:
        """Approve ``ids`` from another process: ``{id: (sent, answered, status)}``."""
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            return pool.submit(_approve, self.url, self.reviewer, ids).result(timeout=1800)


class Served:
    """A provider process on a new SQLite file, and its :class:`View`."""

    def __init__(self, *, poll_cap: float = 60.0) -> None:
        from approval_guard.provider import Store

        self._dir = tempfile.TemporaryDirectory(prefix="ag-bench-")
        db = Path(self._dir.name) / "approvals.sqlite3"
        store = Store(str(db))
        try:
            credential = store.create_credential("instance", "bench")
            reviewer = store.create_credential("reviewer", "bench")
        finally:
            store.close()
        self.process = ServerProcess(
            [*PROVIDER, "--db", str(db), "--port", "0", "--poll-cap", str(poll_cap)]
        )
        self.view = View(self.process.url, credential, reviewer, db, self.process.pid)

    def close(self) -> None:
        self.process.stop()
        self._dir.cleanup()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
