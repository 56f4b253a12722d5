"""A rules file's ``email_to``: per tool or in ``[defaults]``, checked at start, needing SMTP."""

from __future__ import annotations

import pytest

from approval_guard.provider import ProviderServer
from approval_guard.provider.channels.email.recipients import email_routes
from approval_guard.provider.rules.config import RulesError, parse_rules

RULES = """\
[defaults]
email_to = ["role:ops"]

[tools.issue_refund]
approvers = ["payments"]
email_to = ["role:payments", "Carol@Example.com", "role:payments"]
"""


def test_email_to_is_kept_per_tool_and_from_the_defaults() -> None:
    """Addresses lower-cased, duplicates dropped; a tool without a table gets [defaults]'."""
    rules = parse_rules(RULES)
    assert ("role:payments", "carol@example.com") == rules.for_tool("issue_refund").email_to
    assert ("role:ops",) == rules.for_tool("other").email_to


def test_the_servers_recipients_come_first_then_the_tools() -> None:
    """``--email-to`` applies to every tool; the rule's entries follow, each entry once."""
    routes = email_routes(["role:payments", "dave@example.com"], parse_rules(RULES))
    assert ("role:payments", "dave@example.com", "carol@example.com") == routes.for_tool(
        "issue_refund"
    )
    assert ("role:payments", "dave@example.com", "role:ops") == routes.for_tool("other")


@pytest.mark.parametrize(
    ("value", "line"),
    [('"role:payments"', 2), ("[]", 2), ('["alice"]', 2), ('["role:has space"]', 2), ("[1]", 2)],
)
def test_a_bad_email_to_names_its_line(value: str, line: int) -> None:
    """Not a non-empty list of addresses and role:NAME entries: RulesError at FILE:LINE."""
    with pytest.raises(RulesError, match=rf"^rules\.toml:{line}: tools\.x\.email_to"):
        parse_rules(f"[tools.x]\nemail_to = {value}\n", "rules.toml")


def test_a_rules_file_that_mails_without_smtp_stops_the_server() -> None:
    """email_to with no SMTP server given: ValueError when the server is made, nothing bound."""
    with pytest.raises(ValueError, match="no SMTP server"):
        ProviderServer(":memory:", rules=parse_rules(RULES))
