"""Provider instances as real processes on one fresh PostgreSQL database: fixture ``fleet``."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator

import attrs
import pytest

from tests.support.api import Api
from tests.support.paths import REPO

LAUNCH = "approval_guard.provider.serving.process"


@attrs.define
class Instance:
    process: subprocess.Popen[str]
    url: str


@attrs.define
class Fleet:
    dsn: str
    instance: str
    reviewer: str
    running: list[Instance] = attrs.Factory(list)

    def start(self, *extra: str) -> Instance:
        """Start an instance; ``extra`` are more of the runner's flags (``--webhook ...``)."""
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                LAUNCH,
                "--dsn",
                self.dsn,
                "--port",
                "0",
                "--instance-token",
                self.instance,
                "--reviewer-token",
                self.reviewer,
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            error = process.stderr.read() if process.stderr is not None else ""
            raise AssertionError(f"the instance did not start: {error[-2000:]}")
        started = Instance(process, json.loads(line)["url"])
        self.running.append(started)
        return started

    def api(self, instance: Instance, *, reviewer: bool = False) -> Api:
        return Api(instance.url, self.reviewer if reviewer else self.instance)


@pytest.fixture
def fleet(pg_dsn: str) -> Iterator[Fleet]:
    """A fresh database of its own, and the instances a test starts on it."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"ag_fleet_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = make_conninfo("", **{**conninfo_to_dict(pg_dsn), "dbname": name})
    made = Fleet(
        dsn=dsn,
        instance="agi_" + secrets.token_urlsafe(24),
        reviewer="agr_" + secrets.token_urlsafe(24),
    )
    try:
        yield made
    finally:
        for instance in made.running:
            if instance.process.poll() is None:
                instance.process.kill()
            instance.process.communicate(timeout=10)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
