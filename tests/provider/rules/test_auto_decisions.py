"""Auto-decisions in the rules file: checked at start (FILE:LINE), deciding covered creates."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from approval_guard.cli import main
from approval_guard.provider.rules.config import RulesError, parse_rules
from tests.support.api import REFUND
from tests.support.grants import Desk, open_desk, store_kind  # noqa: F401 (fixture)

AUTO = """\
[tools.issue_refund]

[[tools.issue_refund.auto]]
name = "small GBP refunds"
decision = "approve"
match = { amount = { max = 1000 }, currency = { in = ["GBP"] } }

[[tools.issue_refund.auto]]
name = "blocked customer"
decision = "deny"
match = { payment_id = { prefix = "blocked_" } }

[[tools.issue_refund.auto]]
name = "alice's own"
decision = "approve"
match = {}
requested_by = ["alice@example.com"]
"""


@pytest.fixture
def desk(store_kind: tuple[str, str | None], tmp_path: Path) -> Iterator[Desk]:  # noqa: F811
    kind, dsn = store_kind
    opened = open_desk(kind, dsn, AUTO, tmp_path=tmp_path)
    try:
        yield opened
    finally:
        opened.server.close()
        opened.store.close()


def test_a_covered_create_is_decided_by_the_rule_and_audited(desk: Desk) -> None:
    """decided_by "rule:NAME", an expiry as for a person, no grant, an audit row."""
    made = desk.agent.new(arguments={**REFUND, "amount": 900})
    assert made["status"] == "approved"
    assert made["decision"]["decided_by"] == "rule:small GBP refunds"
    assert made["decision"]["expires_at"] is not None
    assert "grant" not in made["decision"]
    audit = desk.store.audit(request_id=made["id"])
    assert audit[-1].action == "request.approval"
    assert audit[-1].detail["rule"] == "small GBP refunds"


def test_unnamed_arguments_are_unconstrained_and_named_ones_must_fit(desk: Desk) -> None:
    """payment_id is free; 1001, 900.0 and EUR are asked of a person."""
    assert desk.agent.new(arguments={**REFUND, "amount": 5, "payment_id": "x"})["status"] == (
        "approved"
    )
    for arguments in (
        {**REFUND, "amount": 1001},
        {**REFUND, "amount": 900, "currency": "EUR"},
        {"payment_id": "p", "currency": "GBP"},
    ):
        assert desk.agent.new(arguments=arguments)["status"] == "pending", arguments


def test_a_deny_rule_wins_over_an_approve_rule(desk: Desk) -> None:
    """Both cover a small GBP refund to a blocked payment: it is denied."""
    made = desk.agent.new(arguments={**REFUND, "amount": 10, "payment_id": "blocked_1"})
    assert made["status"] == "denied"
    assert made["decision"]["decided_by"] == "rule:blocked customer"


def test_a_deny_rule_wins_over_a_grant(desk: Desk) -> None:
    """A reviewer's grant covering a blocked payment does not approve it."""
    arguments = {**REFUND, "amount": 5000, "payment_id": "blocked_9"}
    body = {"tool": "issue_refund", "arguments": arguments, "timeout": "30m"}
    first = desk.agent.create(body=body)
    assert first.json()["status"] == "denied"
    pending = desk.agent.new(arguments={**REFUND, "amount": 5000})
    answer = desk.grant(pending["id"], "alice", {"for": "1h", "match": {"payment_id": "any"}})
    assert answer.status_code == 200
    assert desk.agent.new(body=body)["status"] == "denied"
    assert desk.agent.new(arguments={**REFUND, "amount": 5000})["status"] == "approved"


def test_requested_by_limits_a_rule_to_those_people(desk: Desk) -> None:
    """Exactly as sent: "alice@example.com" is covered, "ALICE@example.com" is not."""
    for who, expected in (("alice@example.com", "approved"), ("ALICE@example.com", "pending")):
        body = {
            "tool": "issue_refund",
            "arguments": {**REFUND, "amount": 99999},
            "timeout": "30m",
            "requested_by": who,
        }
        assert desk.agent.new(body=body)["status"] == expected, who


def test_no_mail_or_poll_is_needed_for_a_rule_decision(desk: Desk) -> None:
    """The create's own answer is final: a poll returns the same decision."""
    made = desk.agent.new(arguments={**REFUND, "amount": 1})
    polled = desk.agent.poll(made["id"]).json()
    assert polled["decision"] == made["decision"]


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\n'
            'match = { amount = { max = "x" } }\n',
            5,
            "max must be a number",
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\n'
            "match = { amount = { in = [] } }\n",
            5,
            "in must be a non-empty list",
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\n'
            "match = { amount = { min = 5, max = 1 } }\n",
            5,
            "min is greater than max",
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\n'
            "match = { amount = { in = [{ a = 1 }] } }\n",
            5,
            "no tables or lists",
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\n'
            "match = { when = { max = 2026-01-01 } }\n",
            5,
            "max must be a number",
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\n'
            'match = { amount = "same" }\n',
            5,
            "'same' needs a request",
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\nmatch = {}\n'
            "colour = 1\n",
            6,
            "unknown key 'colour'",
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "maybe"\nmatch = {}\n',
            4,
            'decision must be "approve" or "deny"',
        ),
        (
            '[tools.t]\n[[tools.t.auto]]\nname = "a"\ndecision = "approve"\n'
            'match = { amount = { regex = ".*" } }\n',
            5,
            "unknown constraint key 'regex'",
        ),
        (
            '[tools.t]\nmax_grant = "forever"\n',
            2,
            "max_grant must be a duration",
        ),
        (
            "[tools.t]\ngrants = 1\n",
            2,
            "grants must be true or false",
        ),
    ],
)
def test_a_bad_auto_rule_stops_serve_with_file_and_line(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    """serve --rules exits 2 naming FILE:LINE and what is wrong; nothing is created."""
    with pytest.raises(RulesError, match=f"rules.toml:{line}:"):
        parse_rules(text, "rules.toml")
    bad = tmp_path / "rules.toml"
    bad.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(
            ["serve", "--db", str(tmp_path / "db.sqlite3"), "--port", "0", "--rules", str(bad)]
        )
    assert code == 2
    assert f"{bad}:{line}:" in err.getvalue() and says in err.getvalue()
    assert not (tmp_path / "db.sqlite3").exists()


def test_a_good_auto_rule_parses_deny_rules_first() -> None:
    """The rule's auto tuple lists deny rules before approve rules."""
    rule = parse_rules(AUTO).for_tool("issue_refund")
    assert [one.decision for one in rule.auto] == ["denied", "approved", "approved"]
    assert rule.max_grant == 3600 and rule.grants is True


FRACTION_RULES = """\
[[tools.issue_refund.auto]]
name = "huge"
decision = "deny"
match = { amount = { min = 100000.5 } }

[[tools.issue_refund.auto]]
name = "small"
decision = "approve"
match = { amount = { min = 0.0, max = 1000.5 } }
"""


def test_a_value_beyond_decimals_reach_meets_the_rules_exactly_never_a_500(
    store_kind: tuple[str, str | None],  # noqa: F811
    tmp_path: Path,
) -> None:
    """1e9999999999999999999999 is denied by min = 100000.5; its reciprocal approved, no 500."""
    kind, dsn = store_kind
    opened = open_desk(kind, dsn, FRACTION_RULES, tmp_path=tmp_path)
    try:
        for text, expected in (
            ("1e9999999999999999999999", "denied"),
            ("1e" + "9" * 5000, "denied"),
            ("1e-9999999999999999999999", "approved"),
            ("-1e9999999999999999999999", "pending"),
        ):
            body = (
                '{"tool": "issue_refund", "timeout": "30m", "arguments": '
                f'{{"payment_id": "p", "amount": {text}, "currency": "GBP"}}}}'
            )
            answer = opened.agent.session.post(
                f"{opened.server.url}/v1/requests",
                data=body.encode(),
                headers=opened.agent.headers(
                    **{
                        "Idempotency-Key": text[:30] + str(len(text)),
                        "Content-Type": "application/json",
                    }
                ),
                timeout=10,
            )
            assert answer.status_code == 201, (text[:40], answer.text)
            assert answer.json()["status"] == expected, text[:40]
    finally:
        opened.server.close()
        opened.store.close()


PERSON_RULES = """\
[[tools.issue_refund.auto]]
name = "not for mallory"
decision = "deny"
match = {}
requested_by = ["mallory@example.com"]

[[tools.issue_refund.auto]]
name = "small"
decision = "approve"
match = { amount = { max = 1000 } }
"""


@pytest.mark.parametrize(
    "who", ["mallory@example.com", "Mallory@Example.com", "\uff4dallory@example.com"]
)
def test_a_deny_rules_person_is_matched_as_self_approval_matches_one(
    store_kind: tuple[str, str | None],  # noqa: F811
    tmp_path: Path,
    who: str,
) -> None:
    """Another case or a fullwidth letter of the denied person's name is still denied."""
    kind, dsn = store_kind
    opened = open_desk(kind, dsn, PERSON_RULES, tmp_path=tmp_path)
    try:
        body = {
            "tool": "issue_refund",
            "arguments": {**REFUND, "amount": 5},
            "timeout": "30m",
            "requested_by": who,
        }
        made = opened.agent.new(body=body)
        assert made["status"] == "denied", made.get("decision")
        assert made["decision"]["decided_by"] == "rule:not for mallory"
    finally:
        opened.server.close()
        opened.store.close()
