"""The rules file: parsed at start, every mistake named with its file and line."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from approval_guard.cli import main
from approval_guard.provider import ProviderServer
from approval_guard.provider.rules.config import DEFAULT_RULE, RulesError, load_rules, parse_rules

SECRET = "whsec_dG9wc2VjcmV0LWtleS0xMjM0NTY="
GOOD = """\
# comment
[defaults]
max_valid_for = "1h"

[tools.issue_refund]
approvers = ["payments", "finance"]
approvals_required = 2
self_approval = false
max_valid_for = "15m"
webhooks = [{url = "https://hooks.example/x", secret = "SECRET", format = "slack"}]

[tools."odd tool"]
approvals_required = 3
""".replace("SECRET", SECRET)


def test_a_good_file_gives_each_tool_its_rule_and_the_rest_the_defaults() -> None:
    """Each key lands on the rule; a tool without a table gets [defaults]."""
    rules = parse_rules(GOOD, "rules.toml")
    refund = rules.for_tool("issue_refund")
    assert ("payments", "finance") == refund.approvers
    assert 2 == refund.approvals_required
    assert refund.self_approval is False
    assert 900 == refund.max_valid_for
    assert (("https://hooks.example/x", SECRET, "slack"),) == refund.webhooks
    assert 3 == rules.for_tool("odd tool").approvals_required
    assert 3600 == rules.for_tool("odd tool").max_valid_for  # from [defaults]
    other = rules.for_tool("anything_else")
    assert (None, 1, True, 3600) == (
        other.approvers,
        other.approvals_required,
        other.self_approval,
        other.max_valid_for,
    )
    assert DEFAULT_RULE == parse_rules("", "empty.toml").for_tool("x")


def test_a_webhook_secret_never_shows_in_a_repr() -> None:
    """The rule's repr hides its webhooks (the secret)."""
    assert SECRET not in repr(parse_rules(GOOD))


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('[tools.a]\napprovers = ["x"]\ncolour = "red"\n', 3, "unknown key 'colour'"),
        ("[tools.a]\n\n\napprovals_required = 11\n", 4, "1 to 10"),
        ('[tools.a]\napprovals_required = "2"\n', 2, "must be an integer"),
        ("[tools.a]\napprovals_required = 0\n", 2, "1 to 10"),
        ('[tools.a]\nself_approval = "no"\n', 2, "true or false"),
        ('[tools.a]\nmax_valid_for = "15 minutes"\n', 2, "from 1s to 24h"),
        ('[tools.a]\nmax_valid_for = "0s"\n', 2, "from 1s to 24h"),
        ('[tools.a]\nmax_valid_for = "100000000000h"\n', 2, "from 1s to 24h"),
        ('[tools.a]\napprovers = [" payments"]\n', 2, "without spaces"),
        # No [tools.X] header: an inline table or a dotted key, on its own line.
        (
            "[defaults]\napprovals_required = 1\n[tools]\na = {approvals_required = 0}\n",
            4,
            "1 to 10",
        ),
        ("[tools]\n\na.approvals_required = 0\n", 3, "1 to 10"),
        ('\n\ntools.x.self_approval = "no"\n', 3, "true or false"),
        ("[tools.a]\napprovers = []\n", 2, "non-empty list"),
        ('[tools.a]\napprovers = "payments"\n', 2, "non-empty list"),
        ('\n[tools.a]\nwebhooks = [{url = "ftp://x"}]\n', 3, "http:// or https://"),
        ('[tools.a]\nwebhooks = [{url = "https://x", format = "teams"}]\n', 2, "standard"),
        ('[tools.a]\nwebhooks = [{url = "https://x", secret = 5}]\n', 2, "secret"),
        ('[tools.a]\nwebhooks = [{url = "https://x", colour = 1}]\n', 2, "unknown key"),
        ('[tool.a]\napprovers = ["x"]\n', 1, "unknown key or table 'tool'"),
        ("[tools.b]\n[tools.a]\nx = 1\n", 3, "unknown key 'x' in [tools.a]"),
        ("[defaults]\napprovals_required = -1\n", 2, "1 to 10"),
        ("[tools]\na = 5\n", 2, "tools.a must be a table"),
        ('[tools.a]\napprovers = ["x"\n', 2, "not valid TOML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_line(
    text: str, line: int, words: str
) -> None:
    """Unknown keys, wrong types and bad values: the error names file:line and what is wrong."""
    with pytest.raises(RulesError) as caught:
        parse_rules(text, "team-rules.toml")
    message = str(caught.value)
    assert message.startswith(f"team-rules.toml:{line}: "), message
    assert words in message


def test_an_error_never_quotes_a_webhook_secret() -> None:
    """A bad webhook entry is named, its values are not."""
    text = '[tools.a]\nwebhooks = [{url = "nope", secret = "whsec_leak"}]\n'
    with pytest.raises(RulesError) as caught:
        parse_rules(text)
    assert "whsec_leak" not in str(caught.value)


def test_a_missing_file_names_it(tmp_path: Path) -> None:
    """load_rules on a file that is not there says which."""
    with pytest.raises(RulesError, match=r"nope\.toml"):
        load_rules(tmp_path / "nope.toml")


def test_the_server_refuses_a_bad_rules_file_at_start(tmp_path: Path) -> None:
    """ProviderServer(rules=bad file) raises before it binds or opens anything."""
    bad = tmp_path / "rules.toml"
    bad.write_text("[tools.a]\napprovals_required = 99\n")
    with pytest.raises(RulesError, match=r"rules.toml:2:"):
        ProviderServer(str(tmp_path / "db.sqlite3"), rules=bad)
    assert not (tmp_path / "db.sqlite3").exists()


def test_serve_with_a_bad_rules_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    """``serve --rules`` with a mistake stops at once with exit code 2 and file:line."""
    bad = tmp_path / "rules.toml"
    bad.write_text("[tools.a]\n\nself_approval = 1\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(
            ["serve", "--db", str(tmp_path / "db.sqlite3"), "--port", "0", "--rules", str(bad)]
        )
    assert 2 == code
    assert f"{bad}:3:" in err.getvalue()
