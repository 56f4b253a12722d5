"""ProxyRules: which tools are guarded, checked against the child's tools; the child's env."""

from __future__ import annotations

import pytest

from approval_guard.exceptions import ConfigurationError
from approval_guard.mcp_proxy import ProxyRules
from approval_guard.mcp_proxy._run import child_environment

TOOLS = {
    "write_file": {"properties": {"path": {"type": "string"}, "mode": {"type": "integer"}}},
    "read_file": {"properties": {"path": {"type": "string"}}},
}


@pytest.mark.parametrize(
    ("tool", "guarded"),
    [
        ("write_file", True),
        ("delete_everything", True),
        ("WRITE_FILE", True),  # a server that looks names up loosely is not a way around
        ("read_file", False),
        ("rewrite_file", False),
    ],
)
def test_patterns_are_globs_on_the_tool_name(tool: str, guarded: bool) -> None:
    """'write_*,delete_*' guards write_file and delete_everything, not read_file."""
    assert guarded == ProxyRules.parse(guard="write_*, delete_*").guards(tool)


def test_the_rules_keep_the_timeout_and_the_named_arguments() -> None:
    """--timeout in seconds; --editable and --redact grouped by tool, sorted."""
    rules = ProxyRules.parse(
        guard="*",
        timeout="10m",
        editable=["write_file:path", "write_file:mode"],
        redact=["write_file:secret.key"],
    )
    assert 600 == rules.timeout
    assert {"write_file": ("mode", "path")} == rules.editable
    assert {"write_file": ("secret.key",)} == rules.redact


def test_the_default_timeout_is_the_librarys() -> None:
    """Without --timeout the approval window is requires_approval's default, 30m."""
    assert 1800 == ProxyRules.parse(guard="*").timeout


@pytest.mark.parametrize(
    ("editable", "says"),
    [
        (["delete_file:path"], "the tool 'delete_file', which the server does not list"),
        (["write_file:colour"], "has no property 'colour'"),
    ],
)
def test_the_childs_tools_must_have_what_the_rules_name(editable: list[str], says: str) -> None:
    """check_tools refuses an editable tool or argument the child does not list."""
    rules = ProxyRules.parse(guard="write_*,delete_*", editable=editable)
    with pytest.raises(ConfigurationError, match=says):
        rules.check_tools(TOOLS)


def test_rules_that_fit_the_tools_pass() -> None:
    """An editable integer and a redacted string of listed tools are fine."""
    rules = ProxyRules.parse(
        guard="write_*", editable=["write_file:mode"], redact=["write_file:path"]
    )
    rules.check_tools(TOOLS)


def test_the_child_never_sees_the_guards_environment() -> None:
    """APPROVAL_GUARD_* (the instance credential above all) stays out of the child's environment."""
    env = child_environment(
        {"PATH": "/bin", "APPROVAL_GUARD_CREDENTIAL": "secret", "APPROVAL_GUARD_URL": "u", "X": "1"}
    )
    assert {"PATH": "/bin", "X": "1"} == env
