"""mcp-proxy's options: a bad one is exit 2 with one clear line, mostly before the child starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.frameworks import require_framework

require_framework("mcp")

import pytest  # noqa: E402

from approval_guard.testing import LocalProvider  # noqa: E402
from tests.support.mcp_proxy import RECORDER, proxy_command, proxy_env  # noqa: E402
from tests.support.paths import REPO  # noqa: E402


def _proxy(
    provider: LocalProvider | None, flags: list[str], child: list[str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        proxy_command(flags, child) if child else proxy_command(flags, [])[:-1],
        env=proxy_env(provider),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _marker_child(marker: Path) -> list[str]:
    """A child command that leaves a file behind if it is ever started."""
    return [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--guard", ""], "--guard must be tool-name patterns"),
        (["--guard", "write_*,,delete_*"], "--guard must be tool-name patterns"),
        (["--guard", "write file"], "is not a glob of a tool name"),
        (["--guard", "write_[ab"], "is not a glob of a tool name"),
        (["--guard", "*", "--timeout", "10x"], "--timeout '10x': malformed duration"),
        (["--guard", "*", "--timeout", "0s"], "--timeout must be a positive duration"),
        (["--guard", "*", "--timeout", "1.5s"], "--timeout"),
        (["--guard", "*", "--timeout", "25h"], "--timeout must be whole seconds between 1s"),
        (["--guard", "*", "--editable", "write_note"], "--editable takes TOOL:ARGUMENT"),
        (["--guard", "*", "--editable", ":copies"], "--editable takes TOOL:ARGUMENT"),
        (["--guard", "*", "--redact", "delete_note:"], "--redact takes TOOL:ARGUMENT"),
        (["--guard", "write_*", "--editable", "read_notes:x"], "which no --guard pattern matches"),
        (
            ["--guard", "*", "--editable", "t:a", "--redact", "t:a.b"],
            "'a' of t is both redacted and editable",
        ),
        (["--guard", "*", "--redact", "t:a..b"], "redact paths must be names joined by dots"),
        (["--guard", "*", "--listen", "127.0.0.1"], "--listen takes HOST:PORT"),
        (["--guard", "*", "--listen", "127.0.0.1:99999"], "--listen takes HOST:PORT"),
        (["--guard", "*", "--listen", "0.0.0.0:8931"], "listens only on a loopback address"),
        (["--guard", "*", "--listen", "example.com:8931"], "listens only on a loopback address"),
        (["--guard", "*", "--listen", "[::ffff:10.0.0.1]:8931"], "only on a loopback address"),
        (["--guard", "*", "--listen", "[[::1]]:8931"], "listens only on a loopback address"),
        (["--guard", "*", "--url", "ftp://x"], "base_url"),
    ],
)
def test_a_bad_option_is_refused_before_the_child_starts(
    provider: LocalProvider, tmp_path: Path, flags: list[str], says: str
) -> None:
    """A bad pattern, duration, TOOL:ARG or HOST:PORT: exit 2, one line; the child never starts."""
    marker = tmp_path / "started"
    done = _proxy(provider, flags, _marker_child(marker))
    assert 2 == done.returncode, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_without_a_provider_the_child_never_starts(tmp_path: Path) -> None:
    """No APPROVAL_GUARD_URL / credential: exit 2 saying what is missing, and nothing started."""
    marker = tmp_path / "started"
    done = _proxy(None, ["--guard", "*"], _marker_child(marker))
    assert 2 == done.returncode
    assert "APPROVAL_GUARD_URL" in done.stderr and "APPROVAL_GUARD_CREDENTIAL" in done.stderr
    assert not marker.exists()


def test_without_a_command_it_says_so(provider: LocalProvider) -> None:
    """mcp-proxy with nothing after -- is a usage error."""
    done = _proxy(provider, ["--guard", "*"], [])
    assert 2 == done.returncode
    assert "needs the MCP server's command after --" in done.stderr


def test_a_command_that_cannot_start_is_one_line(provider: LocalProvider, tmp_path: Path) -> None:
    """A child that does not exist: exit 1, one line, no traceback."""
    done = _proxy(provider, ["--guard", "*"], [str(tmp_path / "no-such-server")])
    assert 1 == done.returncode, done.stderr
    assert "cannot start" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        ("write_nothing:x", "--editable names the tool 'write_nothing', which the server does not"),
        ("write_note:colour", "the input schema of 'write_note' has no property 'colour'"),
        ("write_note:extra", "which an edit cannot be converted to"),
    ],
)
def test_an_editable_the_childs_tools_do_not_have_stops_the_proxy(
    provider: LocalProvider, record: Path, flag: str, says: str
) -> None:
    """--editable of a tool or argument the child lacks (or cannot convert): exit 2 once listed."""
    done = _proxy(provider, ["--guard", "write_*", "--editable", flag], [*RECORDER, str(record)])
    assert 2 == done.returncode, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_a_redact_path_the_schema_does_not_have_stops_the_proxy(
    provider: LocalProvider, record: Path
) -> None:
    """--redact of an argument the inputSchema does not list: exit 2 once the list is known."""
    flags = ["--guard", "delete_*", "--redact", "delete_note:secret"]
    done = _proxy(provider, flags, [*RECORDER, str(record)])
    assert 2 == done.returncode, done.stderr
    assert "the input schema of 'delete_note' has no property 'secret'" in done.stderr
