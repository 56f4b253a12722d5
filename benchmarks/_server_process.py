"""A server under test in its own process, and what /proc says about it (Linux).

The provider and the floor both print one JSON line ``{"url": ...}`` once they
serve; :class:`ServerProcess` starts either, reads that line, and reports the
process's RSS, threads, sockets and CPU time for the server benchmark.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ServerProcess:
    """A server under test in its own process, with the facts /proc gives about it."""

    def __init__(self, argv: Sequence[str], *, timeout: float = 60.0, root: Path = ROOT) -> None:
        """``root``: the source tree it runs from (another checkout, for an A/B of two versions)."""
        self.argv = list(argv)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        self.process = subprocess.Popen(
            [sys.executable, *self.argv], cwd=root, env=env,
            stdout=subprocess.PIPE, stderr=self._stderr, text=True,
        )  # fmt: skip
        self.url = self._read_url(timeout)

    def _read_url(self, timeout: float) -> str:
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if selector.select(timeout):
                line = self.process.stdout.readline()
                if line.strip():
                    return str(json.loads(line)["url"])
        self.kill()
        raise RuntimeError(f"{' '.join(self.argv[:2])} did not start: {self.stderr_tail()}")

    def stderr_tail(self, chars: int = 800) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-chars:].strip()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _status(self, field: str) -> int:
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def rss(self) -> int:
        """Resident set size in bytes."""
        return self._status("VmRSS") * 1024

    def threads(self) -> int:
        return self._status("Threads")

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def sockets(self) -> int:
        count = 0
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                if os.readlink(f"/proc/{self.pid}/fd/{fd}").startswith("socket:"):
                    count += 1
            except OSError:
                pass
        return count

    def wait_quiet(self, *, sockets: int, timeout: float, window: float = 0.3) -> bool:
        """Wait until it holds ``sockets`` sockets and has stopped using the CPU."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sockets() >= sockets:
                before = self.cpu_seconds()
                time.sleep(window)
                if self.cpu_seconds() - before < 0.05 * window:
                    return True
            else:
                time.sleep(0.05)
        return False

    def kill(self) -> None:
        """SIGKILL: nothing gets to run on the way out."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
