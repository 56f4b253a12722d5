"""examples/mcp_proxy.py runs as its docstring says: a real proxy before a notes server."""

from __future__ import annotations

import subprocess
import sys

from tests.support.frameworks import require_framework

require_framework("mcp")

from tests.support.paths import REPO  # noqa: E402


def test_the_example_shows_an_approval_a_denial_and_an_unguarded_call() -> None:
    """python examples/mcp_proxy.py prints the tools, the approved write, the denial, the read."""
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "mcp_proxy.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    assert 0 == done.returncode, done.stderr
    assert [
        "tools: ['write_note', 'list_notes']",
        "approved: wrote 'buy milk' x1",
        "reviewer saw: {'copies': 1, 'text': 'buy milk'}",
        "denied (isError=True): A person denied this call to write_note: no more notes today. "
        "Do not retry the same call: tell the user it was denied, and ask how to go on.",
        "unguarded: buy milk",
    ] == done.stdout.splitlines()
