"""The provider on PostgreSQL: a decision on A wakes a poll on B; creates and decisions per second.

The PostgreSQL server comes from ``APPROVAL_GUARD_TEST_DSN`` or, in a full
run, a throwaway one started with ``.ci/postgres.sh`` (as the ledger tests'
conftest does). The write rates are measured, in a full run, on a throwaway
server of their own with ``fsync`` and ``synchronous_commit`` on, as in
production (CI's server has them off, and a commit's WAL flush is most of a
write's cost on PostgreSQL); a quick run takes the environment's server as it
is, and says which. Each part gets a database of its own, dropped at the end,
so credentials given on the first start are the only ones there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._server_load import (
    RawConnection,
    approve_all,
    create_body,
    create_many,
    creates_per_second,
    statuses,
)
from ._server_process import ROOT, ServerProcess

POSTGRES_SCRIPT = ROOT / ".ci" / "postgres.sh"
#: The provider's bare entry point (as tests/provider/serving/test_durability.py starts it).
PROVIDER = ["-m", "approval_guard.provider.serving.process"]


class Skip(Exception):
    """This part cannot run here; the message says why (it becomes the table's note)."""


def provider_flags() -> str:
    """The provider entry point's ``--help``, to see which options it takes today."""
    done = subprocess.run(
        [sys.executable, *PROVIDER, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    return done.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def postgres_server(*, may_start: bool, durable: bool = False) -> Iterator[str]:
    """A DSN: the environment's, else (``may_start``) a throwaway server's, else Skip.

    ``durable`` and ``may_start``: always a throwaway server, with fsync on.
    """
    dsn = os.environ.get("APPROVAL_GUARD_TEST_DSN")
    if dsn and not (durable and may_start):
        yield dsn
        return
    if not may_start:
        raise Skip("APPROVAL_GUARD_TEST_DSN is unset (a quick run starts no PostgreSQL server)")
    if not shutil.which("initdb") or not POSTGRES_SCRIPT.exists():
        raise Skip("APPROVAL_GUARD_TEST_DSN is unset and initdb is not installed")
    env = {
        **os.environ,
        "APPROVAL_GUARD_PG_DIR": str(Path(tempfile.gettempdir()) / f"ag-bench-{uuid.uuid4().hex}"),
        "APPROVAL_GUARD_PG_PORT": str(_free_port()),
        "APPROVAL_GUARD_PG_INSTALL": "0",
        "APPROVAL_GUARD_PG_DURABLE": "1" if durable else "0",
    }
    script = [str(POSTGRES_SCRIPT)]
    try:
        started = subprocess.run(
            [*script, "start"], env=env, capture_output=True, text=True, timeout=120
        )
        if started.returncode != 0:
            raise Skip(f"could not start a throwaway PostgreSQL: {started.stderr.strip()[-300:]}")
        yield started.stdout.strip().splitlines()[-1].split("=", 1)[1].strip("'")
    finally:
        subprocess.run([*script, "stop"], env=env, capture_output=True, timeout=120)


@contextlib.contextmanager
def fresh_database(dsn: str) -> Iterator[str]:
    """A new, empty database on the server of ``dsn``; dropped afterwards."""
    try:
        import psycopg
        from psycopg import sql
        from psycopg.conninfo import make_conninfo
    except ImportError:
        raise Skip("psycopg is not installed (pip install 'approval-guard[postgres]')") from None
    name = f"ag_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


async def _sample(
    creator: RawConnection,
    reviewer: RawConnection,
    poller: RawConnection,
    instance: str,
    reviewer_token: str,
    k: int,
) -> float:
    """One request: poll it on ``poller``, decide it on ``reviewer``; decision sent -> answer."""
    status, body = await creator.call(
        "POST", "/v1/requests", token=instance, body=create_body(k),
        idempotency_key=str(uuid.uuid4()),
    )  # fmt: skip
    if status != 201:
        raise RuntimeError(f"a create was answered {status}, not 201")
    request_id = body["id"]
    poller.send("GET", f"/v1/requests/{request_id}?wait=60s", token=instance)
    await poller.drain()
    answer = asyncio.ensure_future(poller.read())
    await asyncio.sleep(0.03)  # let the poll settle into its wait on the other instance
    if answer.done():
        raise RuntimeError("a poll came back before its request was decided")
    sent = time.perf_counter()
    decided, _ = await reviewer.call(
        "POST", f"/v1/requests/{request_id}/decision", token=reviewer_token,
        body={"status": "approved", "valid_for": "5m"},
    )  # fmt: skip
    poll_status, polled = await answer
    answered = time.perf_counter()
    if decided != 200 or poll_status != 200 or polled.get("status") != "approved":
        raise RuntimeError("a decision or its poll did not come back approved")
    return answered - sent


async def _samples(a_url: str, b_url: str, instance: str, reviewer: str, n: int) -> dict[str, Any]:
    conns = [await RawConnection.open(url) for url in (a_url, a_url, a_url, b_url)]
    creator, decider, poll_a, poll_b = conns
    cross: list[float] = []
    same: list[float] = []
    try:
        for k in range(n):  # interleaved, so both see the same machine
            cross.append(await _sample(creator, decider, poll_b, instance, reviewer, 2 * k))
            same.append(await _sample(creator, decider, poll_a, instance, reviewer, 2 * k + 1))
    finally:
        for conn in conns:
            conn.close()
    return {"cross": cross, "same": same}


def two_instances(samples: int, *, may_start: bool) -> dict[str, Any]:
    """Decision on A -> poll answered on B (and on A, for reference), ``samples`` of each."""
    flags = provider_flags()
    if "--dsn" not in flags:
        raise Skip("the provider entry point takes no --dsn yet")
    if "--instance-token" not in flags or "--reviewer-token" not in flags:
        raise Skip(
            "the provider entry point takes no --instance-token/--reviewer-token, "
            "so the benchmark cannot set credentials on a PostgreSQL database"
        )
    instance, reviewer = "agi_bench_" + secrets.token_hex(16), "agr_bench_" + secrets.token_hex(16)
    tokens = ["--instance-token", instance, "--reviewer-token", reviewer]
    with postgres_server(may_start=may_start) as dsn, fresh_database(dsn) as db_dsn:
        argv = [*PROVIDER, "--dsn", db_dsn, "--port", "0", *tokens]
        with ServerProcess(argv) as a, ServerProcess(argv) as b:
            return asyncio.run(_samples(a.url, b.url, instance, reviewer, samples))


def durability(dsn: str) -> str:
    """How the server keeps a commit: ``fsync on, synchronous_commit on`` or otherwise."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        fsync, synchronous = (
            str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("fsync", "synchronous_commit")
        )
    return f"fsync {fsync}, synchronous_commit {synchronous}"


def wal_syncs(dsn: str) -> int | None:
    """How many times the server has synced its WAL to disk (PostgreSQL 14+), else None."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
        except psycopg.Error:
            return None
    return None if row is None else int(row[0])


def writes(dsn: str, creates: int, decisions: int, *, root: Path = ROOT) -> dict[str, Any]:
    """One instance on a new database: creates/s on 1 and 8 connections, then per reviewer
    count a burst of ``decisions`` approvals, a SIGKILL right after, and what survived.

    ``root``: the source tree the provider runs from (another checkout, for an A/B).
    """
    instance, reviewer = "agi_bench_" + secrets.token_hex(16), "agr_bench_" + secrets.token_hex(16)
    tokens = ["--instance-token", instance, "--reviewer-token", reviewer]
    out: dict[str, Any] = {"durability": durability(dsn), "creates": {}, "decisions": {}}
    with fresh_database(dsn) as db_dsn:
        argv = [*PROVIDER, "--dsn", db_dsn, "--port", "0", *tokens]
        process = ServerProcess(argv, root=root)
        try:
            for clients in (1, 8):
                total = creates // (4 if clients == 1 else 1)
                cpu = process.cpu_seconds()
                rate = creates_per_second(process.url, instance, total, clients)
                out["creates"][str(clients)] = {
                    "per_second": rate,
                    "cpu_per_create": (process.cpu_seconds() - cpu) / (total + clients),
                }
            for reviewers in (1, 8):
                ids = asyncio.run(create_many(process.url, instance, decisions, 8))
                synced = wal_syncs(dsn)
                cpu = process.cpu_seconds()
                decided = asyncio.run(approve_all(process.url, reviewer, ids, reviewers))
                cpu = process.cpu_seconds() - cpu
                process.kill()
                process.stop()
                time.sleep(1.0)  # the killed instance's backends report their WAL syncs
                after = wal_syncs(dsn)
                process = ServerProcess(argv, root=root)
                acked = [rid for rid, (_, _, code) in decided.items() if code == 200]
                found = asyncio.run(statuses(process.url, instance, acked, 8))
                first = min(s for s, _, _ in decided.values())
                seconds = max(a for _, a, _ in decided.values()) - first
                out["decisions"][str(reviewers)] = {
                    "decisions": decisions,
                    "reviewers": reviewers,
                    "acked": len(acked),
                    "seconds": seconds,
                    "per_second": len(acked) / seconds,
                    "cpu_per_decision": cpu / decisions,
                    "wal_syncs_per_decision": None
                    if synced is None or after is None
                    else (after - synced) / decisions,
                    "lost": sum(1 for rid in acked if found.get(rid) != "approved"),
                }
        finally:
            process.stop()
    return out
